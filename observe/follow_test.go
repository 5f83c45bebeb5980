package observe

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFollow: a parent's endpoint re-exposes its generators' endpoints,
// each series under its generator label — runs, latency histograms and
// the generators' own process figures — reads one that has not written its
// address yet as nothing, and keeps an ended generator's run figures (not
// its process's) after its endpoint went.
func TestFollow(t *testing.T) {
	parent, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	parent.Serve()
	defer parent.Close()
	dir := t.TempDir()
	type gen struct {
		e     *Exporter
		flows int64
		ended func()
	}
	gens := make([]*gen, 3)
	for i := range gens {
		id := string(rune('0' + i))
		e, err := ListenAs("127.0.0.1:0", id)
		if err != nil {
			t.Fatal(err)
		}
		e.Serve()
		g := &gen{e: e, flows: int64(10 * (i + 1))}
		gens[i] = g
		run := e.Begin(Labels{Strategy: "rowlock", Scenario: "sustained"}, func() Snapshot { return Snapshot{Flows: g.flows} })
		run.Observe("flow", time.Millisecond)
		if err := os.MkdirAll(filepath.Join(dir, id), 0o755); err != nil {
			t.Fatal(err)
		}
		file := AddrFile(filepath.Join(dir, id))
		g.ended = parent.Follow(id, file)
		if i < 2 { // the third has not listened yet
			if err := e.WriteAddr(file); err != nil {
				t.Fatal(err)
			}
		}
		defer e.Close()
	}
	lv := func(id string) string {
		return `{generator="` + id + `",repeat="1",scenario="sustained",strategy="rowlock"}`
	}
	cases := []struct {
		name      string
		want      float64
		presentAt bool
	}{
		{"stockbench_flows_total" + lv("0"), 10, true},
		{"stockbench_flows_total" + lv("1"), 20, true},
		{"stockbench_flows_total" + lv("2"), 0, false}, // not listening yet,
		{`stockbench_latency_seconds_count{generator="0",op="flow",repeat="1",scenario="sustained",strategy="rowlock"}`, 1, true},
	}
	text := scrape(t, parent.Addr())
	for _, c := range cases {
		got, ok := value(text, c.name)
		if ok != c.presentAt || ok && got != c.want {
			t.Errorf("%s = %v (found %v), want %v (present %v)", c.name, got, ok, c.want, c.presentAt)
		}
	}
	for _, want := range []string{`stockbench_harness_process_cpu_seconds_total{generator="0"}`, "\ngo_goroutines{generator=\"1\"} ", "\ngo_goroutines "} {
		if !strings.Contains(text, want) {
			t.Errorf("%q missing: a generator's process figures or the parent's own", want)
		}
	}
	// Generator 0 ends and goes: its run's last figures stay, its process's go.
	gens[0].flows = 99
	gens[0].ended()
	gens[0].e.Close()
	text = scrape(t, parent.Addr())
	for _, c := range cases {
		if got, ok := value(text, c.name); ok != c.presentAt || ok && got != c.want {
			t.Errorf("after the end: %s = %v (found %v), want %v", c.name, got, ok, c.want)
		}
	}
	if strings.Contains(text, `stockbench_harness_process_cpu_seconds_total{generator="0"}`) {
		t.Errorf("an ended generator's process figures stayed")
	}
	if !strings.Contains(text, `stockbench_harness_process_cpu_seconds_total{generator="1"}`) {
		t.Errorf("a live generator's process figures went")
	}
	if t.Failed() {
		t.Log(text)
	}
}
