"""How a run was started (run.json's ``argv`` and ``cwd``) on the run page, and no machine path on
the site (#43: a site is meant to be mailed): paths inside the folder holding the ledger relative
to it, others as ``…/`` and their last part, the program by its name; run.json keeps them whole."""

from __future__ import annotations

import sys

import pytest
from conftest import ARTIFACTS

import labledger
from labledger.site import build_site, load_data_file
from labledger.site.shown_paths import shown_command, shown_path, shown_paths

SHOTS = ARTIFACTS / "screenshots"


@pytest.mark.parametrize(
    "path, shown",
    [
        ("/home/me/proj", "."),
        ("/home/me/proj/", "."),
        ("/home/me/proj/src/../data/x.csv", "data/x.csv"),
        ("/home/me/project-two/x", "…/x"),  # a sibling sharing the prefix is outside
        ("/home/me", "…/me"),
        ("~/proj/x", "…/x"),
        ("D:\\runs\\exp1", "…/exp1"),
        ("relative/x", "relative/x"),
        ("", ""),
    ],
)
def test_shown_path(path, shown):
    assert shown_path(path, project="/home/me/proj") == shown


def test_shown_command_and_record():
    argv = ["/opt/conda/bin/python", "/home/me/proj/train.py", "--out", "/scratch/me/out", "--cfg=/home/me/proj/c.yaml"]
    assert shown_command(argv, project="/home/me/proj") == "python train.py --out …/out --cfg=c.yaml"
    assert shown_command(["t.py", "--name", "it's"], project=None) == "t.py --name 'it'\"'\"'s'"
    record = {"imported_from": {"source": "/data/wandb/run-1", "importer": {"argv": ["/v/labledger", "import"]}}}
    assert shown_paths(record, project="/p") == {
        "imported_from": {"source": "…/run-1", "importer": {"argv": ["…/labledger", "import"]}}
    }


@pytest.fixture
def started_site(tmp_path, monkeypatch):
    """A run started from a sub-folder of the project by a program outside it, with paths inside
    and outside the project in its arguments, and a checkpoint logged by reference from outside."""
    project = tmp_path / "proj"
    (project / "exp").mkdir(parents=True)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "init.pt").write_bytes(b"weights")
    monkeypatch.chdir(project / "exp")
    argv = [
        str(tmp_path / "venv" / "bin" / "python"),
        str(project / "exp" / "train.py"),
        "--data",
        str(outside / "data"),
        f"--config={project / 'exp' / 'c.yaml'}",
    ]
    monkeypatch.setattr(sys, "argv", argv)
    with labledger.start_run("started", ledger=project / ".labledger") as run:
        run.log(1, loss=0.5)
        run.log_checkpoint(outside / "init.pt", step=1, copy=False)
    build_site(project / ".labledger", project / "site")
    return {"tmp": tmp_path, "project": project, "run": run, "argv": argv}


def test_the_run_payload_shows_how_the_run_started_without_machine_paths(started_site):
    project, run = started_site["project"], started_site["run"]
    text = (project / "site" / "data" / "runs" / f"{run.id}.js").read_text()
    payload = load_data_file(project / "site" / "data" / "runs" / f"{run.id}.js")[1]
    assert payload["started_as"] == {"command": "python exp/train.py --data …/data --config=exp/c.yaml", "cwd": "exp"}
    assert payload["meta"]["argv"] == ["python", "exp/train.py", "--data", "…/data", "--config=exp/c.yaml"]
    assert payload["meta"]["cwd"] == "exp" and "notes" not in payload["meta"]
    assert [c["path"] for c in payload["checkpoints"]] == ["…/init.pt"]
    assert str(started_site["tmp"]) not in text
    # run.json keeps every path whole
    meta = labledger.open_ledger(project / ".labledger").run(run.id).meta
    assert meta["argv"] == started_site["argv"] and meta["cwd"] == str(project / "exp")


def test_no_page_of_the_site_carries_a_machine_path(started_site):
    site = started_site["project"] / "site"
    leaked = [
        p.relative_to(site)
        for p in site.rglob("*")
        if p.is_file() and p.suffix in (".js", ".html") and str(started_site["tmp"]) in p.read_text(errors="replace")
    ]
    assert leaked == []


@pytest.mark.browser
def test_the_run_page_shows_how_the_run_started(browser, started_site):
    run = started_site["run"]
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto((started_site["project"] / "site" / "run.html").as_uri() + f"#run={run.id}")
        page.wait_for_selector("body[data-ready='1']")
        started = page.locator("#started-as")
        assert started.inner_text() == (
            "Started as python exp/train.py --data …/data --config=exp/c.yaml in exp (under the folder holding the ledger)"
        )
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(
            path=str(SHOTS / "run-started-as-1280.png"), clip={"x": 0, "y": 0, "width": 1280, "height": 320}
        )
        assert str(started_site["tmp"]) not in page.locator("main").inner_text()
        assert errors == []
    finally:
        page.close()
