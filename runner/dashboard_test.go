package runner_test

import (
	"context"
	"encoding/json"
	"net/http"
	osexec "os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stockbench/stockbench/internal/waitfor"
	"github.com/stockbench/stockbench/observe"
	"github.com/stockbench/stockbench/runner"
	"github.com/stockbench/stockbench/strategies/registry"
)

// TestDashboardInChromium: headless Chromium loads the live page during a
// run and sees its figures move (the second shown advances), then the
// run's final figures once it ended.
func TestDashboardInChromium(t *testing.T) {
	browser, err := osexec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not installed (Debian: apt-get install chromium)")
	}
	d, err := observe.ListenDashboard("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	e, err := registry.Lookup("rowlock")
	if err != nil {
		t.Fatal(err)
	}
	o := sustainedOptions()
	// Long enough for two page loads on a busy machine.
	o.Duration, o.Dashboard = 30*time.Second, d
	done := make(chan error, 1)
	var ended atomic.Bool
	go func() {
		_, err := runner.RunStrategy(context.Background(), env.Conns, e, o.Scenarios[0], o)
		ended.Store(true)
		done <- err
	}()
	url := "http://" + d.Addr() + "/"
	points := func() int {
		resp, err := http.Get(url + "live.json")
		if err != nil {
			return 0
		}
		defer resp.Body.Close()
		var v struct {
			Runs []struct{ Points []json.RawMessage }
		}
		if json.NewDecoder(resp.Body).Decode(&v) != nil || len(v.Runs) == 0 {
			return 0
		}
		return len(v.Runs[0].Points)
	}
	second := regexp.MustCompile(`<div class="v">(\d+)</div><div class="k">second</div>`)
	shown := func() (int, string) {
		out, err := osexec.Command(browser, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=2000", "--dump-dom", url).Output()
		if err != nil {
			t.Fatalf("chromium: %v", err)
		}
		m := second.FindSubmatch(out)
		if m == nil {
			return -1, string(out)
		}
		n, _ := strconv.Atoi(string(m[1]))
		return n, string(out)
	}
	waitfor.Until(t, "the page's first seconds", func() bool { return points() >= 2 })
	first, dom := shown()
	if first < 1 || !strings.Contains(dom, "flows/s") {
		t.Fatalf("the page shows no second (%d):\n%s", first, dom)
	}
	p1 := points()
	waitfor.Until(t, "a later second", func() bool { return points() >= p1+2 || ended.Load() })
	if ended.Load() {
		t.Fatal("the run ended before the page could be loaded again")
	}
	later, dom := shown()
	if later <= first {
		t.Fatalf("the page's second did not move: %d then %d:\n%s", first, later, dom)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	_, dom = shown()
	if !strings.Contains(dom, "final: ") || !strings.Contains(dom, ">done<") {
		t.Fatalf("no final figures after the run:\n%s", dom)
	}
	t.Logf("the page showed second %d, then %d, then the final figures", first, later)
}
