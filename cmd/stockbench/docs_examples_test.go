package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stockbench/stockbench/servers/servertest"
)

// example is one documented command (or one script of several lines that
// share shell variables or background jobs), where it is written.
type example struct {
	file string
	line int
	cmd  string
	// also lists the other places the same command is written.
	also []string
}

func (e example) where() string { return fmt.Sprintf("%s:%d", e.file, e.line) }

// exampleDocs are the files whose examples are run: the README and every
// docs/*.md but flags.md (the commands' -h, checked by TestFlagsDoc).
func exampleDocs(t *testing.T) []string {
	docs, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs = slices.DeleteFunc(docs, func(p string) bool { return filepath.Base(p) == "flags.md" })
	return append([]string{filepath.Join("..", "..", "README.md")}, docs...)
}

var (
	// commandStart is how a runnable line begins.
	commandStart = regexp.MustCompile(`^(stockbench|make)( |$)`)
	// bareCommand is a command written in prose without the program name
	// (`run --backend docker …`).
	bareCommand = regexp.MustCompile(`^(run|sweep|curve|faults|audit|compare|merge|prepare|calibrate|report|down) -`)
	// inlineSpan is a code span in prose (it may wrap lines).
	inlineSpan = regexp.MustCompile("`([^`]+)`")
	// optional is the [--flag value] notation of an optional part.
	optional = regexp.MustCompile(`\s*\[[^\]]*\]`)
)

// stripComment removes a trailing # comment outside quotes.
func stripComment(s string) string {
	var quote rune
	for i, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && (i == 0 || s[i-1] == ' '):
			return strings.TrimSpace(s[:i])
		}
	}
	return strings.TrimSpace(s)
}

// extractExamples returns the example commands of one markdown file: every
// line of a fenced block (no language, sh or bash) that starts with
// stockbench or make (continuation lines joined, comments dropped; a block
// that sets a shell variable or starts a background job is one script),
// and every inline code span that is a whole command: stockbench or make
// with a subcommand and at least one argument more (`stockbench merge`
// alone names a command, it is no example), or any make target.
func extractExamples(t *testing.T, path string) []example {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(filepath.ToSlash(path), "../../")
	lines := strings.Split(string(b), "\n")
	var out []example
	inBlock, shell := false, false
	var block []example
	script := false
	var prose strings.Builder
	proseLine := map[int]int{} // offset in prose → line number
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			if !inBlock {
				lang := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "```"))
				inBlock, shell, block, script = true, lang == "" || lang == "sh" || lang == "bash", nil, false
				continue
			}
			inBlock = false
			if script && len(block) > 0 {
				var cmds []string
				for _, e := range block {
					cmds = append(cmds, e.cmd)
				}
				out = append(out, example{file: name, line: block[0].line, cmd: strings.Join(cmds, "\n")})
			} else {
				for _, e := range block {
					if commandStart.MatchString(e.cmd) {
						out = append(out, e)
					}
				}
			}
			continue
		}
		if inBlock {
			if !shell {
				continue
			}
			start := i
			full := l
			for strings.HasSuffix(strings.TrimSpace(full), `\`) && i+1 < len(lines) {
				i++
				full = strings.TrimSuffix(strings.TrimSpace(full), `\`) + " " + strings.TrimSpace(lines[i])
			}
			cmd := strings.Join(strings.Fields(stripComment(full)), " ")
			if cmd == "" {
				continue
			}
			if regexp.MustCompile(`^[A-Z_]+=`).MatchString(cmd) || strings.HasSuffix(cmd, "&") {
				script = true
			}
			block = append(block, example{file: name, line: start + 1, cmd: cmd})
			continue
		}
		proseLine[prose.Len()] = i + 1
		prose.WriteString(l + "\n")
	}
	// Inline spans, on the prose only (a span may wrap a line).
	text := prose.String()
	for _, m := range inlineSpan.FindAllStringSubmatchIndex(text, -1) {
		cmd := strings.Join(strings.Fields(text[m[2]:m[3]]), " ")
		if bareCommand.MatchString(cmd) {
			cmd = "stockbench " + cmd
		}
		if !commandStart.MatchString(cmd) {
			continue
		}
		if f := strings.Fields(cmd); f[0] == "stockbench" && (len(f) < 3 || len(f) == 3 && strings.HasPrefix(f[2], "--")) {
			continue // names a command or a flag
		}
		line := 0
		for off, n := range proseLine {
			if off <= m[0] && n > line {
				line = n
			}
		}
		out = append(out, example{file: name, line: line, cmd: cmd})
	}
	return out
}

// exampleSkips are the documented commands this machine cannot run, or
// that this test must not, each with its reason; the first match decides.
var exampleSkips = []struct {
	match  *regexp.Regexp
	reason string
}{
	{regexp.MustCompile(`^make test\b`), "the suite this test is part of"},
	{regexp.MustCompile(`^stockbench serve\b`), "a service that runs until it is stopped; docs/api.md's examples run against one in service's TestDocsExamples, and TestServe* start and stop it"},
	{regexp.MustCompile(`^make hooks\b`), "configures the checkout's git hooks (TestCommitMsgHook checks the hook)"},
	{regexp.MustCompile(`^make projection\b`), "runs five strategies unconstrained and under three CPU budgets, three times each (~10 min); TestProjectAgainst checks its table, TestDockerLimitCPU and TestApplyCPUBudget its budgets"},
	{regexp.MustCompile(`^make screenshots\b`), "photographs report pages with headless Chromium (installed with apt) and rewrites docs/screenshots; its runs are the documented ones run here"},
	{regexp.MustCompile(`^make images-offline\b`), "builds the offline images with debootstrap as root (~1.5 min, apt); the images are used by every docker example"},
	{regexp.MustCompile(`tcp\((db|10\.0\.0\.\d+):3306\)|redis:6379|--redis-addr 127\.0\.0\.1:6379`), "placeholder servers (your database and Redis, an external cluster)"},
	{regexp.MustCompile(`\$DSN|alert-sink`), "placeholder: your DSN and your alert sink"},
	{regexp.MustCompile(`──►|\s=\s`), "a line of a diagram, not a command"},
	{regexp.MustCompile(`…|OUT DIR|\w\|\w| (N|KEY|I/N|RESULTS)( |$)|:N\b|=N\]|--strategies S\b`), "placeholder notation (…, OUT DIR, N, KEY, RESULTS, process:N, --strategies S, a|b): the full form is run where the doc writes it"},
	{regexp.MustCompile(`--mysql-cluster \d`), "a local Galera cluster: its joiners copy state one after another, over a minute each (the conformance suite runs on one in make test)"},
	{regexp.MustCompile(`^make faults\b`), wholeMatrix},
}

// wholeMatrix is why the whole fault matrix is not run: its single
// columns (faults --only …) are.
const wholeMatrix = "the whole fault matrix: 6 faults × strategies, over 2 minutes even shortened; the examples with --only run its columns"

// exampleSkip is the reason an example is not run, or "".
func exampleSkip(cmd string) string {
	if strings.HasPrefix(cmd, "stockbench faults") && !strings.Contains(cmd, "--only") {
		return wholeMatrix
	}
	for _, s := range exampleSkips {
		if s.match.MatchString(cmd) {
			return s.reason
		}
	}
	return ""
}

// exampleExits are the exits an example may end with besides 0: a verdict,
// not a failure to run.
var exampleExits = []struct {
	match *regexp.Regexp
	codes []int
	why   string
}{
	// compare's verdict on two shortened runs: 1 is a regression found.
	{regexp.MustCompile(`^stockbench compare `), []int{exitOK, exitFailed}, "a regression verdict"},
	// A fault can leave a run's settle or audit unfinished: the run is
	// then unproven, written, and exits 3 (docs/running.md, exit codes).
	// Seen: lua-tcc's settle after redis-restart under load, 1 run in 2.
	{regexp.MustCompile(`^stockbench faults |--fault `), []int{exitOK, exitIncomplete}, "a fault left a phase unfinished (unproven)"},
	// A threshold's verdict: 1 is a breach or an abort, the run written
	// (docs/ci.md shows naive stopped by --abort-on anomaly).
	{regexp.MustCompile(`--abort-on |--threshold `), []int{exitOK, exitFailed}, "a threshold breached (the run stopped or flagged, and written)"},
}

// ownServers matches the commands that need servers the harness starts
// itself (faults act on its processes, --rtt shapes its network, a Redis
// Cluster is its own): the test's servers are not given to them.
var ownServers = regexp.MustCompile(`--fault|^stockbench faults|rtt|--redis-cluster|^make faults`)

// consumer reports whether an example reads what other examples write
// (reports, results, acks): consumers run after every producer.
func consumer(cmd string) bool {
	return regexp.MustCompile(`^stockbench (report|compare|merge|audit) `).MatchString(cmd)
}

// TestDocsExamples runs every example command of the README and docs/ as
// written (see exampleSkips for what it cannot run and why), shortened by
// STOCKBENCH_EXAMPLE_SHORT=1 (docs/running.md), in a copy of the checkout
// with this package's binary first on PATH as stockbench. Commands without
// --backend run on servers the harness's local provider started, given in
// the environment as a user's external servers would be; --backend local
// and docker start their own. A documented command that fails fails the
// test, with its output.
func TestDocsExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the documented commands on real servers; not in the -short tier")
	}
	var all []example
	seen := map[string]int{}
	for _, doc := range exampleDocs(t) {
		for _, e := range extractExamples(t, doc) {
			if i, ok := seen[e.cmd]; ok {
				all[i].also = append(all[i].also, e.where())
				continue
			}
			seen[e.cmd] = len(all)
			all = append(all, e)
		}
	}
	if len(all) < 30 {
		t.Fatalf("found %d example commands; the extractor lost some", len(all))
	}
	// Producers first, then what reads their output, each in doc order.
	slices.SortStableFunc(all, func(a, b example) int {
		ca, cb := consumer(a.cmd), consumer(b.cmd)
		switch {
		case ca == cb:
			return 0
		case ca:
			return 1
		}
		return -1
	})

	work := t.TempDir()
	copyCheckout(t, work)
	bin := filepath.Dir(buildStockbench(t))
	env, stop, err := servertest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	t.Setenv(shortEnv, "1")
	// make build in the copy then finds in the build cache every package
	// buildStockbench compiled: a checkout's path is no part of a
	// -trimpath build.
	t.Setenv("GOFLAGS", strings.TrimSpace(os.Getenv("GOFLAGS")+" -trimpath"))
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("STOCKBENCH_MYSQL_DSN", env.Endpoints.MySQLDSN)
	t.Setenv("STOCKBENCH_REDIS_URL", redisURLOf(env.Endpoints))
	t.Setenv("STOCKBENCH_REDIS_ADDR", "")

	start := time.Now()
	ran, skipped := 0, 0
	for _, e := range all {
		cmd := optional.ReplaceAllString(e.cmd, "")
		if reason := exampleSkip(cmd); reason != "" {
			skipped++
			t.Logf("skip %s: %s — %s", e.where(), e.cmd, reason)
			continue
		}
		ran++
		t0 := time.Now()
		var extra []string
		if ownServers.MatchString(cmd) {
			// Auto then chooses the servers it starts itself (docker here).
			extra = []string{"STOCKBENCH_MYSQL_DSN=", "STOCKBENCH_REDIS_URL="}
		}
		code, out := runExample(t, work, cmd, extra)
		ok := code == exitOK
		for _, x := range exampleExits {
			if x.match.MatchString(cmd) && slices.Contains(x.codes, code) {
				ok = true
			}
		}
		t.Logf("ran  %s: %s — exit %d in %.1f s", e.where(), e.cmd, code, time.Since(t0).Seconds())
		for _, x := range exampleExits {
			if code != exitOK && x.match.MatchString(cmd) && slices.Contains(x.codes, code) {
				t.Logf("     exit %d accepted: %s\n%s", code, x.why, lastLines(out, 4))
			}
		}
		if !ok {
			t.Errorf("%s (also %v): %s: exit %d\n%s", e.where(), e.also, e.cmd, code, lastLines(out, 15))
		}
	}
	t.Logf("docs examples: ran %d commands, skipped %d, in %.0f s", ran, skipped, time.Since(start).Seconds())
}

// buildStockbench builds this package's binary, named stockbench, into a
// directory of its own and returns its path.
func buildStockbench(t *testing.T) string {
	t.Helper()
	exe := filepath.Join(t.TempDir(), "stockbench")
	if out, err := exec.Command("go", "build", "-trimpath", "-o", exe, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return exe
}

// runExample runs one example with sh in dir, and returns its exit code
// and output. A command that outlives its deadline is a failure.
func runExample(t *testing.T, dir, cmd string, env []string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, "sh", "-ec", cmd)
	c.Dir = dir
	c.Env = append(os.Environ(), env...)
	// Its own process group, killed whole at the deadline: a command that
	// outlives it (a server) must not be left running as an orphan.
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
	c.WaitDelay = 10 * time.Second
	out, err := c.CombinedOutput()
	if c.Process != nil {
		// Whatever the example started in the background and left is
		// ended with it.
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &ee) && ctx.Err() == nil:
		return ee.ExitCode(), string(out)
	default:
		return -1, string(out) + "\n" + err.Error()
	}
}

// copyCheckout copies the tracked files of the checkout into dir, so that
// make targets and relative paths (-f scenarios/…) work as in a clone, and
// nothing an example writes lands in the checkout.
func copyCheckout(t *testing.T, dir string) {
	t.Helper()
	root := filepath.Join("..", "..")
	c := exec.Command("git", "ls-files", "-z")
	c.Dir = root
	list, err := c.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, p := range strings.Split(strings.TrimRight(string(list), "\x00"), "\x00") {
		src := filepath.Join(root, p)
		st, err := os.Lstat(src)
		if err != nil || !st.Mode().IsRegular() {
			continue // deleted in the work tree, or a link
		}
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, st.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	var ls []string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		ls = append(ls, sc.Text())
	}
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n")
}

// TestExtractExamples: the extractor finds fenced commands (joined across
// continuation lines, comments dropped), scripts, and inline commands
// that wrap a line, and leaves names of commands alone.
func TestExtractExamples(t *testing.T) {
	doc := "intro `stockbench merge` names it; run `stockbench run\n--seed 2` or `make bench`.\n" +
		"```\nstockbench run --a 1 \\\n  --b 2   # comment\nnot a command\n```\n" +
		"```json\nstockbench run --in-json\n```\n" +
		"```\nF=\"--x\"\nstockbench prepare $F\nstockbench run $F &\n```\n"
	path := filepath.Join(t.TempDir(), "d.md")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range extractExamples(t, path) {
		got = append(got, fmt.Sprintf("%d %s", e.line, e.cmd))
	}
	want := []string{
		"4 stockbench run --a 1 --b 2",
		"12 F=\"--x\"\nstockbench prepare $F\nstockbench run $F &",
		"1 stockbench run --seed 2",
		"2 make bench",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
}
