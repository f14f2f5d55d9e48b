#!/usr/bin/env bash
# `drkc report` (tools/report.c) on the committed synthetic log (tests/report/synthetic.jsonl:
# missing fields, strings to escape, three policies on one kernel, an unknown event) and on
# logs of the real tuning loop (report_gen_log: drk_search_tune on a synthetic landscape, one
# log per policy, given together).
#   cli:    exit codes, --help, the malformed-line errors (FILE:LINE:COL, exit 2), escaping,
#           no network references in the page
#   render: the pages in headless Chromium: the script drew them (data-rendered=1) and the
#           counts of plotted points it wrote into <body data-*> match the logs; the page made
#           no network request (Chromium's net log: no request with the page as initiator;
#           checked to catch one on a probe page that does request). Skipped (77), with a
#           message, without Chromium (tools/setup.sh installs Debian's).
# usage: report.sh cli|render DRKC GEN_LOG SRC_DIR WORK
set -u
MODE=$1 DRKC=$2 GEN=$3 SRC=$4 W=$5
rm -rf "$W"; mkdir -p "$W"
fail=0
bad() { echo "FAIL: $*"; fail=1; }
# run EXPECTED_RC NEEDLE cmd...: exit code and a substring of stdout+stderr
run() {
  local want=$1 needle=$2; shift 2
  out=$("$@" 2>&1); rc=$?
  [ "$rc" = "$want" ] || bad "'$*' exited $rc, expected $want: $out"
  [ -z "$needle" ] || grep -qF -- "$needle" <<<"$out" || bad "'$*' does not say '$needle': $out"
}
SYN=$SRC/synthetic.jsonl
"$GEN" "$W" 40 || { echo "FAIL: report_gen_log"; exit 1; }
for f in rl evo random; do [ -s "$W/$f.jsonl" ] || bad "report_gen_log wrote no $f.jsonl"; done

# no network references: no URL, no attribute that loads anything, no CSS import; the CSP
# forbids every fetch
no_network() {
  local page=$1
  if grep -qiE '\b(https?|ftp|wss?):|//[a-z0-9.-]+\.[a-z]{2,}/' "$page"; then bad "$page has a URL: $(grep -oiE '.{20}\b(https?|ftp|wss?):.{20}' "$page" | head -3)"; fi
  if grep -qiE '<(link|img|iframe|object|embed|audio|video|source)[ >]|[^a-z-](src|href|srcset|action)=|url\(|@import' "$page"; then
    bad "$page has something that loads: $(grep -oiE '.{20}(<link|<img|src=|href=|url\(|@import).{20}' "$page" | head -3)"
  fi
  grep -qF "default-src 'none'" "$page" || bad "$page has no Content-Security-Policy default-src 'none'"
  [ "$(grep -o '<script' "$page" | wc -l)" = 2 ] || bad "$page: expected exactly 2 script elements (data, drawing)"
}

if [ "$MODE" = cli ]; then
  run 0 "usage: drkc report LOG..." "$DRKC" report --help
  run 0 "drkc report LOG..." "$DRKC" --help
  run 2 "drkc report needs a log" "$DRKC" report
  run 2 "unknown option '--bogus'" "$DRKC" report "$SYN" --bogus
  run 1 "cannot open $W/missing.jsonl" "$DRKC" report "$W/missing.jsonl" -o "$W/x.html"
  run 1 "cannot write" "$DRKC" report "$SYN" -o "$W/no/such/dir/x.html"
  run 0 "" "$DRKC" report "$SYN" -o "$W/s.html"
  run 0 "" "$DRKC" report "$W/rl.jsonl" "$W/evo.jsonl" "$W/random.jsonl" -o "$W/g.html" --title="three <policies>"
  "$DRKC" report "$SYN" > "$W/stdout.html" 2>/dev/null || bad "report to stdout failed"
  cmp -s "$W/s.html" "$W/stdout.html" || bad "-o and stdout pages differ"
  for p in "$W/s.html" "$W/g.html"; do
    [ -s "$p" ] || { bad "$p not written"; continue; }
    no_network "$p"
    grep -q '</html>' "$p" || bad "$p is cut short"
  done
  # escaping: the log's "<script>" and quotes end up as text, never as markup
  grep -qF "resnet&lt;b&gt;&amp;&quot;50&quot;.onnx" "$W/s.html" || bad "the model name is not HTML-escaped"
  grep -qF "k3_Conv&lt;relu&gt;" "$W/s.html" || bad "the kernel name is not HTML-escaped"
  grep -qF "resnet<b>" "$W/s.html" && bad "a log string became markup"
  grep -qF "<script>alert" "$W/s.html" && bad "a log string became a script"
  grep -qF "three &lt;policies&gt;" "$W/g.html" || bad "--title is not HTML-escaped"
  grep -qF "k3_Conv\u003crelu\u003e" "$W/s.html" || bad "the kernel name is not escaped in the page's data"
  grep -q 'n/a' "$W/s.html" || bad "missing fields do not show as n/a"
  ls "$W"/*.tmp >/dev/null 2>&1 && bad "a temporary file was left behind"

  # malformed lines: the file and the line, exit 2, no page
  head -6 "$SYN" > "$W/bad1.jsonl"; echo '{"event":"trial","kernel":"k1",' >> "$W/bad1.jsonl"; tail -3 "$SYN" >> "$W/bad1.jsonl"
  run 2 "$W/bad1.jsonl:7:" "$DRKC" report "$W/bad1.jsonl" -o "$W/bad1.html"
  [ -e "$W/bad1.html" ] && bad "a page was written for a malformed log"
  printf '{"event":"start"}\n\n[1,2]\n' > "$W/bad2.jsonl"
  run 2 "$W/bad2.jsonl:3:1: error: malformed log line: expected '{'" "$DRKC" report "$W/bad2.jsonl" -o "$W/bad2.html"
  printf '{"event":"start"}\n{"kernel":"k1","x":1}\n' > "$W/bad3.jsonl"
  run 2 "$W/bad3.jsonl:2: error: malformed log line: no \"event\" field" "$DRKC" report "$W/bad3.jsonl"
  printf '{"event":3}\n' > "$W/bad4.jsonl"
  run 2 "$W/bad4.jsonl:1: error: malformed log line: \"event\" is not a string" "$DRKC" report "$W/bad4.jsonl"
  printf '{"event":"trial","kernel":"k1"} trailing\n' > "$W/bad5.jsonl"
  run 2 "$W/bad5.jsonl:1:" "$DRKC" report "$SYN" "$W/bad5.jsonl" -o "$W/bad5.html"
  printf '{"event":"trial","kernel":"a\x01b"}\n' > "$W/bad6.jsonl"
  run 2 "$W/bad6.jsonl:1:" "$DRKC" report "$W/bad6.jsonl"
  # an empty log and one with only unknown events: a page of n/a, no crash
  : > "$W/empty.jsonl"; run 0 "" "$DRKC" report "$W/empty.jsonl" -o "$W/empty.html"
  grep -q 'n/a' "$W/empty.html" || bad "an empty log's page says nothing is known"
  printf '{"event":"future","a":[1,2]}\n' > "$W/future.jsonl"; run 0 "" "$DRKC" report "$W/future.jsonl" -o "$W/future.html"
  [ $fail = 0 ] && echo "report.cli: exit codes, malformed lines, escaping, no network references: ok"
  exit $fail
fi

# ---- render ----
CHROMIUM=${DRK_CHROMIUM:-}
if [ -z "$CHROMIUM" ]; then
  for c in chromium chromium-browser google-chrome google-chrome-stable; do
    command -v "$c" >/dev/null && { CHROMIUM=$(command -v "$c"); break; }
  done
fi
if [ -z "$CHROMIUM" ]; then
  echo "SKIP: no chromium (tools/setup.sh installs Debian's; or set DRK_CHROMIUM): the report pages' rendering was not checked"
  exit 77
fi
PY=$(command -v python3) || { echo "SKIP: no python3 to read Chromium's net log"; exit 77; }

# browse PAGE NAME: the DOM after the scripts ran into $W/NAME.dom, the net log into $W/NAME.net
browse() {
  rm -rf "$W/profile"
  timeout 90 "$CHROMIUM" --headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --user-data-dir="$W/profile" --log-net-log="$W/$2.net" \
    --dump-dom "file://$1" > "$W/$2.dom" 2> "$W/$2.err" || bad "chromium failed on $1: $(tail -3 "$W/$2.err")"
}
# requests the page started (initiator: the page's origin, "null" for file://; Chromium's own
# background requests have none)
page_requests() {
  "$PY" - "$1" <<'EOF'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except ValueError:  # a net log cut short: read the events that are complete
    t = open(sys.argv[1]).read().rstrip().rstrip(',')
    d = json.loads(t + (']}' if '"events"' in t else ''))
types = {v: k for k, v in d['constants']['logEventTypes'].items()}
for e in d.get('events', []):
    p = e.get('params') or {}
    if types.get(e['type']) == 'URL_REQUEST_START_JOB' and p.get('initiator') not in (None, 'not an origin'):
        print(p.get('url'))
EOF
}
# attr NAME DOMFILE: the value of <body data-NAME="...">
attr() { grep -o '<body[^>]*>' "$2" | head -1 | grep -o "data-$1=\"[^\"]*\"" | sed 's/.*="\(.*\)"/\1/'; }
# counts over log files: trial events, those with a numeric reward, tuning runs (start events)
trials() { cat "$@" | grep -c '"event":"trial"'; }
rewards() { cat "$@" | grep '"event":"trial"' | grep -c '"reward":-\?[0-9]'; }
starts() { cat "$@" | grep -c '"event":"start"'; }

check_page() { # PAGE NAME LOGS...
  local page=$1 name=$2; shift 2
  browse "$page" "$name"
  local dom=$W/$name.dom
  [ "$(attr rendered "$dom")" = 1 ] || bad "$name: the page's script did not finish: rendered='$(attr rendered "$dom")' $(attr error "$dom")"
  local want_r want_t want_s
  want_r=$(rewards "$@"); want_t=$(trials "$@"); want_s=$(starts "$@")
  [ "$want_r" -gt 0 ] && [ "$want_t" -gt 0 ] || bad "$name: the logs have no trials with rewards"
  [ "$(attr reward "$dom")" = "$want_r" ] || bad "$name: $(attr reward "$dom") reward points plotted, the logs have $want_r"
  [ "$(attr best-reward "$dom")" = "$want_r" ] || bad "$name: $(attr best-reward "$dom") best-reward points, expected $want_r"
  [ "$(attr best-time "$dom")" = "$want_t" ] || bad "$name: $(attr best-time "$dom") best-time points, the logs have $want_t trials"
  [ "$(attr series "$dom")" = "$want_s" ] || bad "$name: $(attr series "$dom") best-time lines, the logs have $want_s tuning runs"
  [ "$(attr bars "$dom")" -gt 0 ] 2>/dev/null || bad "$name: no bars drawn"
  [ "$(attr segments "$dom")" -gt 0 ] 2>/dev/null || bad "$name: no precision segments drawn"
  # every chart says how many points it drew; their sum is the plotted total
  local sum
  sum=$(grep -o 'data-points="[0-9]*"' "$dom" | sed 's/[^0-9]//g' | awk '{s += $1} END {print s + 0}')
  local total=$(( $(attr reward "$dom") + $(attr best-reward "$dom") + $(attr best-time "$dom") + $(attr bars "$dom") + $(attr segments "$dom") ))
  [ "$sum" = "$total" ] || bad "$name: the charts' data-points add up to $sum, the body's counts to $total"
  local req
  req=$(page_requests "$W/$name.net")
  [ -z "$req" ] || bad "$name: the page requested: $req"
  echo "$name: rendered; $(attr charts "$dom") charts, $(attr reward "$dom") reward points, $(attr best-time "$dom") best-time points in $(attr series "$dom") runs, $(attr bars "$dom") bars, $(attr segments "$dom") precision segments; no network requests"
}

"$DRKC" report "$SYN" -o "$W/s.html" || bad "drkc report on the synthetic log failed"
"$DRKC" report "$W/rl.jsonl" "$W/evo.jsonl" "$W/random.jsonl" -o "$W/g.html" || bad "drkc report on three logs failed"
check_page "$W/s.html" synthetic "$SYN"
check_page "$W/g.html" generated "$W/rl.jsonl" "$W/evo.jsonl" "$W/random.jsonl"
# three policies on one kernel: one plot with three lines
grep -q 'data-series="ppo"' "$W/generated.dom" && grep -q 'data-series="evo"' "$W/generated.dom" &&
  grep -q 'data-series="random"' "$W/generated.dom" || bad "generated: no best-so-far line per policy"

# the net-log check catches a page that does request
printf '<!DOCTYPE html><html><body><img src="http://probe.invalid/x.png"></body></html>\n' > "$W/probe.html"
browse "$W/probe.html" probe
[ -n "$(page_requests "$W/probe.net")" ] || bad "the net-log check missed the probe page's request"

if [ $fail = 0 ] && [ -n "${DRK_REPORT_SCREENSHOT:-}" ]; then
  "$CHROMIUM" --headless --no-sandbox --disable-gpu --user-data-dir="$W/profile" --window-size=1300,2400 \
    --screenshot="$W/g.png" "file://$W/g.html" >/dev/null 2>&1
fi
rm -rf "$W/profile"
[ $fail = 0 ] && echo "report.render: ok"
exit $fail
