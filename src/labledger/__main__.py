from labledger.cli import run

if __name__ == "__main__":
    run(prog_name="labledger")
