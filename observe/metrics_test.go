package observe

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stockbench/stockbench/results"
)

func TestCheckAddr(t *testing.T) {
	cases := []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1:9464", true},
		{"127.0.0.2:9464", true},
		{"localhost:9464", true},
		{"[::1]:9464", true},
		{"0.0.0.0:9464", false},
		{":9464", false},
		{"10.1.2.3:9464", false},
		{"example.com:9464", false},
		{"127.0.0.1", false},
		{"127.0.0.1:http", false},
		{"127.0.0.1:70000", false},
	}
	for _, c := range cases {
		t.Run(c.addr, func(t *testing.T) {
			err := CheckAddr(c.addr)
			if (err == nil) != c.ok {
				t.Fatalf("CheckAddr(%q) = %v, want ok=%v", c.addr, err, c.ok)
			}
		})
	}
}

func TestListenBusyPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := Listen(l.Addr().String()); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("Listen on a busy port: %v", err)
	}
	// Never served: Close still releases the port.
	e, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := e.Addr()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := Listen(addr)
	if err != nil {
		t.Fatalf("port not released by Close: %v", err)
	}
	again.Close()
}

// TestExporter: a run's source is read at each scrape while it runs, and
// its last figures are kept once it ended.
func TestExporter(t *testing.T) {
	e, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.Serve()
	defer e.Close()
	flows := int64(0)
	src := func() Snapshot {
		return Snapshot{Flows: flows, Attempts: 2 * flows, Violations: 1,
			Outcomes:   map[string]map[string]int64{"reserve": {"ok": flows, "out_of_stock": 3}},
			Units:      map[string]int64{"reserved": 2 * flows, "refunded": 1},
			Counters:   map[string]float64{"outbox_backlog": 7},
			CPUSeconds: map[string]float64{"mysql": 2.5, "harness": 0.75},
			Stores:     &results.StoreSecond{MySQLRowLockTimeMS: 1500, MySQLCommits: 9},
			Latest:     &results.StoreSecond{MySQLThreadsRunning: 4, RedisClients: 5}}
	}
	run := e.Begin(Labels{Strategy: "rowlock", Scenario: "sustained", Repeat: 2}, src)
	run.Observe("flow", 3*time.Millisecond)
	run.Observe("reserve", time.Millisecond)
	run.Observe("refund", 2*time.Millisecond)
	run.Observe("nonsense", time.Millisecond) // ignored
	var nilRun *Run
	nilRun.Observe("flow", time.Second) // a run without an endpoint
	lv := `repeat="2",scenario="sustained",strategy="rowlock"`
	flows = 10
	cases := []struct {
		name string
		want float64
	}{
		{"stockbench_flows_total{" + lv + "}", 10},
		{"stockbench_attempts_total{" + lv + "}", 20},
		{"stockbench_probe_violations_total{" + lv + "}", 1},
		{`stockbench_operations_total{class="out_of_stock",op="reserve",` + lv + "}", 3},
		{`stockbench_strategy_counter{name="outbox_backlog",` + lv + "}", 7},
		{`stockbench_cpu_seconds_total{` + lv + `,tier="mysql"}`, 2.5},
		{`stockbench_cpu_seconds_total{` + lv + `,tier="harness"}`, 0.75},
		{"stockbench_mysql_row_lock_time_seconds_total{" + lv + "}", 1.5},
		{"stockbench_mysql_threads_running{" + lv + "}", 4},
		{`stockbench_latency_seconds_count{op="flow",` + lv + "}", 1},
		{`stockbench_latency_seconds_count{op="reserve",` + lv + "}", 1},
		{`stockbench_latency_seconds_count{op="refund",` + lv + "}", 1},
		{`stockbench_units_total{movement="reserved",` + lv + "}", 20},
		{`stockbench_units_total{movement="refunded",` + lv + "}", 1},
	}
	check := func(text string) {
		t.Helper()
		for _, c := range cases {
			if got, ok := value(text, c.name); !ok || got != c.want {
				t.Errorf("%s = %v (found %v), want %v", c.name, got, ok, c.want)
			}
		}
	}
	check(scrape(t, e.Addr()))
	run.End()
	flows = 99 // after End the endpoint keeps the final figures
	check(scrape(t, e.Addr()))
	if t.Failed() {
		t.Log(scrape(t, e.Addr()))
	}
}

func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func value(text, name string) (float64, bool) {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			var f float64
			_, err := fmtSscan(strings.Fields(v)[0], &f)
			return f, err == nil
		}
	}
	return 0, false
}

// BenchmarkObserve is the per-operation cost --metrics-addr adds to the
// load generator's hot path: one histogram observation (a flow adds three:
// reserve, confirm and the flow).
func BenchmarkObserve(b *testing.B) {
	e, err := Listen("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	run := e.Begin(Labels{Strategy: "s", Scenario: "x"}, func() Snapshot { return Snapshot{} })
	b.RunParallel(func(pb *testing.PB) {
		d := time.Duration(0)
		for pb.Next() {
			d += 37 * time.Microsecond
			run.Observe("flow", d%(2*time.Second))
		}
	})
}

func fmtSscan(s string, f *float64) (int, error) { return fmt.Sscan(s, f) }
