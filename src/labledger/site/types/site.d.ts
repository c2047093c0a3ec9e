/* Types of the static site's JavaScript: the `LL` namespace (common.js, charts.js) and the payloads
   the Python builders write as data files (site/*.py). Checked by `npm run lint` (tsc --checkJs);
   nothing here ships with the site. The document field names are the stored documents' own
   (value, ci_low, ci_high, ci, key, metric, diff, p_value, a, b, mcnemar, tasks, slices, metrics,
   per_class, confusion_matrix). */

/* ------------------------------------------------------------------ shared pieces */
type Num = number | null;
type Scalar = string | number | boolean | null;
type Json = Scalar | Json[] | { [key: string]: Json };

/** A value with its interval (per-class statistics, slice metrics, ...). */
interface Interval {
  value: Num;
  ci_low?: Num;
  ci_high?: Num;
  /** The stored interval level (0.9 for a 90% CI). */
  ci?: Num;
}

/** One metric of an evaluation (and of its slices). */
interface MetricEntry extends Interval {
  metric: string;
  key: string;
  params: Record<string, Json>;
  definition?: string | null;
  higher_is_better?: boolean | null;
  resamples?: number | null;
  method?: string | null;
  n?: Num;
  clusters?: Num;
  undefined_resamples?: Num;
  /** #16: the analytic interval of a per-item mean, the few-cluster warning, why no interval. */
  analytic?: AnalyticInterval | null;
  warning?: string | null;
  interval_note?: string | null;
}

/** The one shape of a confusion matrix: rows are `rows` (gold), columns `columns` (prediction). */
interface ConfusionMatrix {
  labels: string[];
  rows: string;
  columns: string;
  matrix: number[][];
  definition?: string | null;
}

interface PerClassRow {
  label: string;
  support: number;
  precision: Interval;
  recall: Interval;
  f1: Interval;
}
interface PerClass {
  definition: string;
  params?: Record<string, Json>;
  ci: Num;
  resamples?: Num;
  method?: string | null;
  labels: PerClassRow[];
}

interface SliceBody {
  n: number;
  metrics: MetricEntry[];
}

interface ReliabilityBin {
  low: number;
  high: number;
  count: number;
  confidence: Num;
  accuracy: Num;
}

/* ------------------------------------------------------------------ stored documents */
interface EvaluationTask {
  kind: string;
  n: number;
  labels?: string[];
  positive?: string | null;
  clusters?: Num;
  headline?: string | null;
  metrics: MetricEntry[];
  per_class?: PerClass | null;
  confusion_matrix?: ConfusionMatrix | null;
  slices?: Record<string, Record<string, SliceBody>> | null;
}
/** One harness metric: what the harness reported beside labledger's recomputed value and interval
    (labledger.analysis.harness.harness_check; `labledger eval --json`'s `harness.checks`). */
interface HarnessCheckRow {
  task: string;
  metric: string;
  harness_value: Num;
  value: Num;
  equal: boolean;
  harness_stderr: Num;
  stderr_method?: string | null;
  ci_low: Num;
  ci_high: Num;
  n?: Num;
  clusters?: Num;
  epochs?: Json;
  note?: string | null;
}
interface HarnessCheck {
  name: string;
  version?: string | null;
  checks: HarnessCheckRow[];
}
interface EvaluationDoc {
  kind?: "evaluation";
  source?: string;
  n?: number;
  ci: Num;
  resamples?: Num;
  seed?: Num;
  tasks: Record<string, EvaluationTask>;
  harness?: HarnessCheck | null;
}

interface McNemar {
  b: number;
  c: number;
  statistic?: Num;
  p_value: Num;
  method?: string | null;
  /** Set for the clustered McNemar (Durkalski et al. 2003). */
  clusters?: Num;
}
/** An analytic interval of a per-item mean (Wilson, CLT-t, cluster-robust CR1). */
interface AnalyticInterval {
  method: string;
  low?: Num;
  high?: Num;
  se?: Num;
  df?: Num;
  ci?: Num;
  clusters?: Num;
}
/** One metric of a comparison: a, b, a − b with its CI and p-value, McNemar when there is one. */
interface ComparisonMetric {
  metric: string;
  key: string;
  /** The key as eval and compare print it (quiet default parameters left out). */
  label?: string;
  params?: Record<string, Json>;
  definition?: string | null;
  higher_is_better?: boolean | null;
  a: Num;
  b: Num;
  diff: Num;
  ci_low: Num;
  ci_high: Num;
  p_value: Num;
  ci?: Num;
  method?: string | null;
  n?: Num;
  clusters?: Num;
  mcnemar: McNemar | null;
  /** The p-value adjusted over the document's family (ComparisonView.adjust). */
  p_adjusted?: Num;
  se?: Num;
  /** Minimum detectable effect at 80% power, alpha 0.05. */
  mde?: Num;
  analytic?: AnalyticInterval | null;
  warning?: string | null;
  interval_note?: string | null;
}
/** One discordant item of a comparison (site/comparisons.py flips_view; texts cut for the page). */
interface FlippedItemView {
  id: string;
  /** "a": A right and B wrong (regression: A's error smaller); "b": the reverse. */
  better: "a" | "b";
  cluster: string | number | null;
  gold: Json;
  pred_a: Json;
  pred_b: Json;
  error_a: Num;
  error_b: Num;
  prompt?: string;
  prompt_b?: string;
  target?: string;
  output_a?: string;
  output_b?: string;
}
/** The items A and B disagree on in one task (compare --items), the counts whole. */
interface FlipsView {
  basis: "correct" | "error" | null;
  a_better: Num;
  b_better: Num;
  cluster: string | null;
  /** Items in the document; shown: those the page keeps. */
  listed: number;
  shown: number;
  items: FlippedItemView[];
}
interface ComparisonTaskView {
  task: string;
  kind: string | null;
  paired: boolean | null;
  n: Num;
  n_a: Num;
  n_b: Num;
  metrics: ComparisonMetric[];
  /** Paired items whose prompts differ (compare --pair-on doc). */
  prompts_differ?: Num;
  flips?: FlipsView | null;
}
/** A stored comparison reduced for the pages (site/comparisons.py comparison_view). */
interface ComparisonView {
  run: string;
  run_name: string;
  name: string;
  a: string | null;
  b: string | null;
  names: { a: string | null; b: string | null };
  ci: Num;
  resamples: Num;
  adjust?: string | null;
  family?: string | null;
  tasks: ComparisonTaskView[];
}

interface SweepTrial {
  threshold: number;
  passed_gates?: boolean;
  [column: string]: number | boolean | null | undefined;
}
interface SweepDoc {
  n: number;
  positive: string;
  objective: string;
  gates: string[];
  decision?: string;
  tie_break?: string;
  definition?: Record<string, Json>;
  threshold_selection: { threshold: number; recall_gate_passed: boolean; [field: string]: Json };
  threshold_trials: SweepTrial[];
  paired_test?: Record<string, Json> | null;
}

interface CalibrationMetric extends Interval {
  metric: string;
  key: string;
  base_metric?: string;
  variant?: string;
  definition?: string | null;
  raw: Num;
  calibrated: Num;
  p_value: Num;
  method?: string | null;
  n?: Num;
}
interface CalibrationTask {
  method: string;
  steps?: string;
  fitted_on?: string;
  status?: string;
  honest?: string;
  n: number;
  metrics: CalibrationMetric[];
  slices?: Record<string, Record<string, SliceBody>> | null;
  reliability?: { bins: ReliabilityBin[]; raw_bins?: ReliabilityBin[]; strategy?: string; note?: string } | null;
}
interface CalibrationDoc {
  ci: Num;
  tasks: Record<string, CalibrationTask>;
  raw: Record<string, Num>;
  calibrated: Record<string, Num>;
  definitions?: Record<string, string>;
  recipe?: Json;
}

/* ------------------------------------------------------------------ page payloads */
/** One stored (or build-time) document of an evaluation folder (site/evaluations.py). */
interface DocumentEntry {
  kind: string;
  origin: string;
  file?: string;
  error?: string;
  doc?: Json;
  thinned: string[];
  /** Only for kind "comparison": the same reduced view as the Comparisons page. */
  comparison?: ComparisonView;
}
interface WorstItem {
  id: Json;
  gold: Json;
  prediction: Json;
  p_gold?: number;
  cross_entropy?: Num;
  abs_error?: number;
  probs?: Record<string, number>;
  slices?: Record<string, Json> | null;
}
interface RowsTask {
  n: number;
  kind: string | null;
  labels: string[];
  confusion?: ConfusionMatrix;
  confusion_note?: string;
  worst?: WorstItem[];
  worst_by?: "cross_entropy" | "abs_error";
  reliability?: { bins: ReliabilityBin[]; note: string };
}
interface RowsView {
  n: number;
  shown: Record<string, Json>[];
  tasks: Record<string, RowsTask>;
  slice_fields: Record<string, number>;
}
interface EvalPayload {
  run: string;
  run_name: string;
  name: string;
  meta: Record<string, Json>;
  documents: DocumentEntry[];
  rows: RowsView | null;
  has_logits: boolean;
}
interface LogitsTask {
  labels: string[];
  gold: number[];
  logits: number[][];
  source: string;
  total: number;
  shown: number;
}
interface LogitsPayload {
  run: string;
  name: string;
  tasks: Record<string, LogitsTask>;
}

interface CatalogRun {
  id: string;
  name: string;
  group?: string | null;
  status?: string | null;
  unreadable?: string | null;
  evaluations?: string[];
  [field: string]: any;
}
/** One column of the packed catalog (labledger/site/packing.py). */
interface PackedColumn {
  c?: any;
  v?: any[];
  f?: string;
  int?: number;
  d?: any[];
  i?: string;
  w?: 1 | 2 | 4;
}
/** Columns of a level of a scalar's summaries (site/curves.py): only its non-empty buckets. */
interface CurveLevel {
  b: number[];
  n: number[];
  mean: Num[];
  min?: Num[];
  max?: Num[];
  last?: Num[];
  minfirst?: number[];
  rt?: Num[];
  ex?: Num[];
}

/** A scalar's summaries (data/curves/<run>.js's entry, or data/curves/<run>/<k>.js). */
interface CurveDoc {
  name: string;
  points: number;
  first: Num;
  last: Num;
  started: Num;
  examples: string | null;
  /** Bucket widths of the levels, the top first. */
  widths: number[];
  /** Per level, the [first, last] bucket of each chunk file (null for the top level). */
  chunks: (number[][] | null)[];
  top: CurveLevel;
  own?: false;
}

/** A run's curve file (data/curves/<run>.js): scalar k's summaries, or where they are. */
interface CurveFile {
  scalars: (CurveDoc | { name: string; own: true })[];
}

interface CatalogPayload {
  runs: CatalogRun[];
  /** The query fields, one array per field (fields.columns[j][i]: field j of run i). */
  fields?: { names: string[]; columns: any[][] };
  comparisons?: { tables: string[]; documents: number; groups: string[] };
  [field: string]: any;
}
interface VersionTableRow {
  benchmark: string;
  metric_id: string;
  category?: string | null;
  values: Record<string, Num>;
  ci?: Record<string, [Num, Num] | null>;
  n?: Record<string, Num>;
  delta?: Num;
  delta_ci?: [number, number] | null;
  p_value?: Num;
  p_adjusted?: Num;
  mde?: Num;
  warning?: string | null;
  significance?: string | null;
  /** The row's columns ranked on their stored predictions (`table --ranks`; RankingDoc). */
  ranking?: { systems: RankEntryView[]; n: number; clusters?: number | null; ci: number; tie_group: string[] } | null;
}
/** One column of a row's ranking (RankEntry). */
interface RankEntryView {
  name: string;
  value: number;
  rank: number;
  rank_low: number;
  rank_high: number;
  tied_with_best: boolean;
}
interface VersionTable {
  suite: string;
  columns: string[];
  rows: VersionTableRow[];
  delta?: { from: string; to: string } | null;
  mean: { n: number; values: Record<string, Num>; delta?: Num };
  /** The level of the paired tests behind the significance marks. */
  ci: Num;
  warnings: string[];
  definition?: string;
  [field: string]: any;
}
interface GroupSummary {
  group: string;
  runs: { id: string; name: string }[];
  metrics: { key: string; n: number; mean: Num; std: Num; min: Num; max: Num; values: [string, number][] }[];
}
interface ComparePayload {
  tables: VersionTable[];
  comparisons: ComparisonView[];
  groups: GroupSummary[];
  group_definition?: string;
}
/** The lineage page (#15): nodes laid out in layers, edges, seed 001's trajectory table. */
interface LineageNode {
  id: string;
  type: "run" | "soup" | "checkpoint" | "external";
  label: string;
  layer: number;
  run_id: string | null;
  sha256: string | null;
  size: number | null;
  step: number | null;
  state: string | null;
  name: string | null;
  /** A run's or soup's headline, "metric value" (null: none, or another kind of node). */
  headline: string | null;
  /** A checkpoint's file name (null for other nodes). */
  file: string | null;
}
interface LineageEdge {
  source: string;
  target: string;
  kind: string;
  weight: number | null;
}
interface LineagePayload {
  nodes: LineageNode[];
  edges: LineageEdge[];
  trajectory: Record<string, string | number | null>[];
}
/** Run, batch and test pages' payloads: read field by field by run.js, batches.js and test.js. */
type RunPayload = Record<string, any>;

/* ------------------------------------------------------------------ the run page's media (media.js) */
/** A mask over an image: its overlay file (under the run's files/), class names and colours by id. */
interface RunMediaMask {
  name: string;
  overlay: string;
  labels: Record<string, string>;
  colors: Record<string, string>;
}
/** An image: its file under the run's files/ (the site has it at images/<run>/<ref>). */
interface RunMediaImage {
  ref: string;
  caption?: string | null;
  w?: number;
  h?: number;
  masks?: RunMediaMask[];
}
/** One image key: the steps shown, their images, and how many images of each step are left out. */
interface RunMediaImages {
  key: string;
  logged: number;
  steps: Num[];
  items: RunMediaImage[][];
  more: number[];
}
/** A table cell: a value, or an image as {image: ref, caption}. */
type RunMediaCell = Json | { image: string; caption?: string | null };
interface RunMediaTable {
  step: Num;
  columns: string[];
  /** Rows logged (data holds at most the first 1,000). */
  rows: number;
  data: RunMediaCell[][];
  /** The result set the table was stored as (rows with id, task, gold and a prediction). */
  results?: string | null;
}
interface RunMediaTables {
  key: string;
  logged: number;
  tables: RunMediaTable[];
}
/** One histogram key: per step shown, its bin edges (one more than counts) and counts. */
interface RunMediaHistograms {
  key: string;
  logged: number;
  steps: Num[];
  bins: Num[][];
  counts: Num[][];
}
interface RunMedia {
  images: RunMediaImages[];
  tables: RunMediaTables[];
  histograms: RunMediaHistograms[];
  /** The files the site copies to images/<run>/ (relative to the run's files/). */
  files: string[];
}
type BatchesToc = Record<string, any>;
type BatchesChunk = Record<string, any>;
type TestPayload = Record<string, any>;

/* ------------------------------------------------------------------ the LL namespace */
type Child = Node | string | number | boolean | null | undefined | Child[];
type Attrs = Record<string, any> | null | undefined;

interface TableColumn<R> {
  key: string;
  label: string;
  num?: boolean;
  title?: string;
  className?: string;
  sortable?: boolean;
  /** The header may break after "_", ".", "/" or "-" (LL.breakable). */
  wrap?: boolean;
  render?: (row: R, i: number) => Child;
  value?: (row: R) => unknown;
  head?: () => Child;
}
interface TableOptions<R> {
  rows: R[];
  columns: TableColumn<R>[];
  sort?: { key: string; dir: number } | null;
  caption?: string;
  pageSize?: number;
  className?: string;
  stack?: boolean;
  sortable?: boolean;
  empty?: string;
  rowClass?: (row: R) => string;
  onRow?: (row: R, tr: HTMLElement) => void;
  onSort?: (sort: { key: string; dir: number }) => void;
}
interface TableWrap extends HTMLElement {
  redraw: (rows?: any[]) => void;
}
interface ChartFigure extends HTMLElement {
  mount: () => void;
  /** New x and series values, drawn in place (a zoomed-in range is kept). */
  setData: (x: number[], values: Num[][]) => void;
  chart?: unknown;
  /** When the chart was last drawn (performance.now()), for bench/site.py. */
  drawnAt?: number;
}
interface LineSeries {
  label: string;
  values: Num[];
  color?: string;
}
interface LineChartOptions {
  title?: string;
  x: number[];
  xLabel?: string;
  series: LineSeries[];
  smoothing?: number;
  marks?: { x: number; label?: string; color?: string }[];
  hlines?: { y: number; label?: string; color?: string }[];
  onPick?: (index: number, x: number) => void;
  /** The x range shown changed (debounced); zoomed: less than the data's whole range. */
  onZoom?: (min: number, max: number, zoomed: boolean) => void;
  pickHint?: string;
  pickLabel?: (index: number, x: number) => string;
  height?: number;
}
interface ReliabilitySeries {
  label: string;
  bins: ReliabilityBin[];
  color?: string;
  dashed?: boolean;
}

interface LLFormat {
  num(v: unknown, digits?: number): string;
  p(p: Num | undefined): string;
  ciLabel(level: Num | undefined): string;
  decimals(v: number, digits?: number): number;
  interval(
    value: Num | undefined,
    lo: Num | undefined,
    hi: Num | undefined,
    opts?: { digits?: number; decimals?: number; signed?: boolean }
  ): { value: string; ci: string };
  sharedDecimals(values: (Num | undefined)[], digits?: number): number;
  exact(v: unknown): string;
  pct(v: any): string;
  time(unix: any): string;
  duration(s: any): string;
  bytes(n: any): string;
}

interface LLData {
  /** The whole catalog: its head and every chunk. */
  catalog(): Promise<CatalogPayload>;
  /** The catalog's head (labledger/site/catalog.py): the newest runs, packed, and what the first paint needs. */
  catalogHead(): Promise<any>;
  /** Chunk k of the catalog (0: the oldest runs), packed. */
  catalogChunk(k: number): Promise<any>;
  compare(): Promise<ComparePayload>;
  lineage(): Promise<LineagePayload>;
  run(id: string): Promise<RunPayload>;
  toc(id: string): Promise<BatchesToc>;
  loss(id: string): Promise<Record<string, any>>;
  chunk(id: string, i: number): Promise<BatchesChunk>;
  evaluation(id: string, name: string): Promise<EvalPayload>;
  logits(id: string, name: string): Promise<LogitsPayload>;
  test(id: string, name: string): Promise<TestPayload>;
  testPart(id: string, name: string, part: string): Promise<Record<string, any>>;
  curve(id: string, k: number): Promise<CurveDoc>;
  curveChunk(id: string, k: number, level: number, c: number): Promise<CurveLevel>;
  diffSide(id: string): Promise<any>;
  diffPaired(id: string): Promise<any>;
}

interface LLNamespace {
  h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs?: Attrs, ...children: Child[]): HTMLElementTagNameMap[K];
  safeHref(href: string): string;
  safeSrc(src: string): string;
  /** A label that may break after each "_", ".", "/" or "-". */
  breakable(text: string): (string | HTMLElement)[];
  clear<T extends Node>(node: T): T;
  main(): HTMLElement;
  load(key: string, src: string): Promise<any>;
  unpackColumn(col: PackedColumn, n: number): any[];
  unpackCatalog(cat: any): CatalogPayload;
  /** Every query field name of a catalog (its head's names). */
  catalogNames(head: any): string[];
  /** A part of the catalog (the head's runs or a chunk), its fields laid out by `names`. */
  catalogPart(payload: any, names: string[]): CatalogPayload;
  /** The catalog of the head's fields and the runs of `parts` (newest first). */
  joinCatalog(head: any, parts: CatalogPayload[]): CatalogPayload;
  /** A gzip-packed data payload ({"encoding": "gzip+base64", "data"}) decompressed; any other as it is. */
  unpack(key: string, payload: any): Promise<any>;
  /** A running run's page in labledger serve: where its following stands (run.js). */
  live?: { cursor: number; fetches: number; records: number; running: boolean };
  liveIntervalMs: number;
  data: LLData;
  findRun(catalog: CatalogPayload, id: string | undefined): CatalogRun;
  imageSrc(runId: string, ref: string): string;
  params(): Record<string, string>;
  query(params: Record<string, unknown>): string;
  link(page: string, params?: Record<string, unknown>): string;
  setHash(params: Record<string, unknown>): void;
  isNum(v: unknown): v is number;
  fmt: LLFormat;
  numCell(v: unknown): Child;
  valueText(v: unknown): string;
  intervalView(m: Interval, level?: Num, decimals?: number): HTMLElement;
  matrixView(cm: ConfusionMatrix, note?: string | null): HTMLElement;
  comparisonTable(doc: ComparisonView): HTMLElement;
  labelOrder(keys: unknown[]): string[];
  viridis(t: number): string;
  inkOn(t: number): string;
  palette: string[];
  section(title: string, id?: string | null, ...children: Child[]): HTMLElement;
  callout(kind: string, text: string): HTMLElement;
  badge(text: string, kind?: string): HTMLElement;
  statusBadge(status: string | null | undefined): HTMLElement;
  chips(items: string[] | null | undefined): HTMLElement;
  kv(obj: Record<string, unknown> | null | undefined, opts?: { compact?: boolean }): HTMLElement;
  jsonTree(value: any, openDepth?: number, depth?: number): HTMLElement;
  table<R>(opts: TableOptions<R>): TableWrap;
  cellValue<R>(c: TableColumn<R>, r: R): any;
  cellCompare(a: unknown, b: unknown): number;
  sortRows<R>(rows: R[], c: TableColumn<R>, dir: number): R[];
  sortHeader<R>(
    thead: HTMLElement,
    cols: TableColumn<R>[],
    sort: { key: string; dir: number } | null,
    onSort: (sort: { key: string; dir: number }) => void,
    sortable?: boolean
  ): void;
  probBars(probs: any, gold?: unknown, pred?: unknown, order?: string[]): Child;
  inputView(value: any, images?: Set<string> | null, runId?: string): HTMLElement;
  crumbs(items: { label: string; href?: string }[]): void;
  title(text: string): void;
  fail(err: any): void;
  footer(): void;
  start(fn: () => unknown): void;
  typing(ev: Event): boolean;
  readyAt?: number;
  /** When the catalog page had every chunk of the catalog in (catalog.js). */
  catalogLoadedAt?: number;
  readyKeys?: string[];
  ema(values: (number | null | undefined)[], alpha: number): Num[];
  lineChart(opts: LineChartOptions): ChartFigure;
  /** The buckets of a level of a scalar's summaries as rows (static/js/charts.js). */
  bucketRows(cols: any, w: number): any[];
  /** The rows of a scalar's summaries for a step range, at the finest level that fits `limit`. */
  curveRange(
    runId: string,
    k: number,
    doc: any,
    s0: number,
    s1: number,
    limit: number
  ): Promise<{ rows: any[]; level: number }>;
  vtable(opts: any): any;
  where: any;
  diffDoc?: (a: any, b: any) => any;
  /** The run page's media section (media.js); null when the run logged no images, tables or histograms. */
  mediaSection?: (run: RunPayload) => HTMLElement | null;
  reliabilityChart(
    series: ReliabilitySeries[],
    opts?: { label?: string; xLabel?: string; yLabel?: string }
  ): HTMLElement;
}

interface Window {
  LL: LLNamespace;
  LABLEDGER: Record<string, unknown>;
  uPlot: any;
}
declare var uPlot: any;
