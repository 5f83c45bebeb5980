package faults

import (
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	s := time.Second
	ms := time.Millisecond
	cases := []struct {
		spec  string
		want  Fault
		canon string
	}{
		{"redis-pause@5s+3s", Fault{Kind: Pause, Target: Redis, At: 5 * s, Duration: 3 * s}, ""},
		{"mysql-pause@5s+3s", Fault{Kind: Pause, Target: MySQL, At: 5 * s, Duration: 3 * s}, ""},
		{"redis-restart@5s", Fault{Kind: Restart, Target: Redis, At: 5 * s}, ""},
		{"mysql-restart@8s", Fault{Kind: Restart, Target: MySQL, At: 8 * s}, ""},
		{"redis-restart@5s+2s", Fault{Kind: Restart, Target: Redis, At: 5 * s, Duration: 2 * s}, ""},
		{"redis-lose@5s+2s", Fault{Kind: Lose, Target: Redis, At: 5 * s, Duration: 2 * s}, ""},
		{"latency:redis=20ms±10ms@4s+6s", Fault{Kind: Latency, Target: Redis, At: 4 * s, Duration: 6 * s, Latency: 20 * ms, Jitter: 10 * ms}, ""},
		{"latency:redis=20ms+-10ms@4s+6s", Fault{Kind: Latency, Target: Redis, At: 4 * s, Duration: 6 * s, Latency: 20 * ms, Jitter: 10 * ms}, "latency:redis=20ms±10ms@4s+6s"},
		{"latency:mysql=5ms@0s+1m", Fault{Kind: Latency, Target: MySQL, Duration: time.Minute, Latency: 5 * ms}, "latency:mysql=5ms@0s+1m0s"},
		{"reset:mysql@6s", Fault{Kind: Reset, Target: MySQL, At: 6 * s}, ""},
		{"reset:redis@6s+500ms", Fault{Kind: Reset, Target: Redis, At: 6 * s, Duration: 500 * ms}, ""},
		{"partition:redis@5s+2s", Fault{Kind: Partition, Target: Redis, At: 5 * s, Duration: 2 * s}, ""},
		{"app-crash@6s", Fault{Kind: AppCrash, Target: App, At: 6 * s}, ""},
		{" app-crash@1.5s ", Fault{Kind: AppCrash, Target: App, At: 1500 * ms}, "app-crash@1.5s"},
		// a service instance, restarted at once or after a while; no index: instance 0
		{"svc-kill@4s:1", Fault{Kind: SvcKill, Target: Svc, At: 4 * s, Instance: 1}, ""},
		{"svc-kill@4s+1s:0", Fault{Kind: SvcKill, Target: Svc, At: 4 * s, Duration: s}, ""},
		{"svc-kill@2s", Fault{Kind: SvcKill, Target: Svc, At: 2 * s}, "svc-kill@2s:0"},
		{"local-fail@5s+2s", Fault{Kind: LocalFail, Target: Local, At: 5 * s, Duration: 2 * s}, ""},
		// one instance frozen; no index: every instance
		{"svc-pause@4s+2s:1", Fault{Kind: SvcPause, Target: Svc, At: 4 * s, Duration: 2 * s, Instance: 1}, ""},
		{"svc-pause@4s+2s", Fault{Kind: SvcPause, Target: Svc, At: 4 * s, Duration: 2 * s, Instance: AllInstances}, ""},
		// a clock ahead for the rest of the run, behind for a window; no sign: ahead
		{"svc-clock@4s:0=+2s", Fault{Kind: SvcClock, Target: Svc, At: 4 * s, Offset: 2 * s}, ""},
		{"svc-clock@1s+3s:2=-1.5s", Fault{Kind: SvcClock, Target: Svc, At: s, Duration: 3 * s, Instance: 2, Offset: -1500 * ms}, ""},
		{"svc-clock@1s:1=250ms", Fault{Kind: SvcClock, Target: Svc, At: s, Instance: 1, Offset: 250 * ms}, "svc-clock@1s:1=+250ms"},
	}
	for _, c := range cases {
		got, err := Parse(c.spec)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.spec, err)
			continue
		}
		if got != c.want {
			t.Errorf("Parse(%q) = %+v, want %+v", c.spec, got, c.want)
		}
		canon := c.canon
		if canon == "" {
			canon = c.spec
		}
		if got.String() != canon {
			t.Errorf("Parse(%q).String() = %q, want %q", c.spec, got.String(), canon)
		}
		// The canonical form parses back to the same fault.
		if again, err := Parse(got.String()); err != nil || again != got {
			t.Errorf("round trip of %q: %+v, %v", got.String(), again, err)
		}
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct{ spec, want string }{
		{"", "no @time"},
		{"redis-pause", "no @time"},
		{"@5s", "no @time"},
		{"redis-pause@5s", "pause needs a duration"},
		{"local-fail@5s", "local-fail needs a duration"},
		{"redis-lose@5s", "lose needs the window it loses"},
		{"mysql-lose@5s+1s", "lose is a Redis fault"},
		{"redis-pause@5s+", "empty duration"},
		{"redis-pause@+3s", "empty start"},
		{"redis-pause@5x+3s", `start "5x": not a duration`},
		{"redis-pause@5s+3", `duration "3": not a duration`},
		{"redis-pause@-1s+3s", "negative"},
		{"redis-pause@1s+0s", "duration +0"},
		{"redis-freeze@1s+2s", `unknown process fault "freeze"`},
		{"kafka-pause@1s+2s", `target "kafka"`},
		{"app-pause@1s+2s", `target "app"`},
		{"redispause@1s+2s", "unknown fault"},
		{"app-crash@1s+2s", "app-crash is instant"},
		{"svc-kill@1s:x", `instance "x"`},
		{"svc-kill@1s:-1", `instance "-1"`},
		{"svc-pause@1s", "svc-pause needs a duration"},
		{"svc-pause@1s+2s:x", `instance "x"`},
		{"svc-clock@1s:0", "svc-clock needs an instance and an offset"},
		{"svc-clock@1s=+2s", "svc-clock needs an instance"},
		{"svc-clock@1s:0=soon", `offset "soon"`},
		{"svc-clock@1s:0=+0s", "offset 0"},
		{"svc-clock@1s:0=+1500us", "whole milliseconds"},
		{"svc-clock@x:0=+2s", `start "x"`},
		{"svc-stop@1s+2s", `target "svc"`},
		{"latency:redis@1s+2s", "latency needs an amount"},
		{"latency:redis=20ms@1s", "latency needs a duration"},
		{"latency:redis=fast@1s+2s", `latency "fast"`},
		{"latency:redis=0ms@1s+2s", "at least 1ms"},
		{"latency:redis=500us@1s+2s", "at least 1ms"},
		{"latency:redis=20ms±30ms@1s+2s", "jitter 30ms above the latency"},
		{"latency:redis=20ms±x@1s+2s", `jitter "x"`},
		{"latency:redis=1500us@1s+2s", "whole milliseconds"},
		{"latency:app=20ms@1s+2s", `target "app"`},
		{"partition:redis@5s", "partition needs a duration"},
		{"partition:db@5s+1s", `target "db"`},
		{"jitter:redis@5s+1s", `unknown network fault "jitter"`},
		{"reset:@5s", `target ""`},
	}
	for _, c := range cases {
		_, err := Parse(c.spec)
		if err == nil {
			t.Errorf("Parse(%q) accepted", c.spec)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, c.want) {
			t.Errorf("Parse(%q): %q, want it to contain %q", c.spec, msg, c.want)
		}
		if strings.Contains(msg, "\n") || !strings.Contains(msg, `"`+c.spec+`"`) {
			t.Errorf("Parse(%q): %q: want one line quoting the spec", c.spec, msg)
		}
	}
}

func TestPlan(t *testing.T) {
	p, err := ParsePlan([]string{"mysql-restart@8s", "redis-pause@5s+3s", "app-crash@1s", "latency:mysql=5ms@1s+2s", "reset:redis@8s"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(p.Strings(), " "); got != "app-crash@1s latency:mysql=5ms@1s+2s redis-pause@5s+3s mysql-restart@8s reset:redis@8s" {
		t.Fatalf("plan order: %s", got)
	}
	if !p.NeedsProxy() || !p.NeedsFaulter() {
		t.Fatal("plan needs proxy and faulter")
	}
	bad := []struct {
		specs []string
		want  string
	}{
		{[]string{"redis-pause@5s+3s", "redis-restart@6s"}, "overlap on redis"},
		{[]string{"redis-restart@6s", "redis-pause@5s+3s"}, "overlap on redis"},
		{[]string{"latency:mysql=5ms@1s+10s", "partition:mysql@5s+1s"}, "overlap on mysql"},
		{[]string{"mysql-restart@5s", "reset:mysql@5s"}, "overlap on mysql"},
		{[]string{"app-crash@5s", "app-crash@5s"}, "overlap on app"},
		{[]string{"svc-kill@5s+2s:1", "svc-kill@6s:1"}, "overlap on svc"},
		// a pause of every instance overlaps a fault on any one of them
		{[]string{"svc-pause@5s+2s", "svc-kill@6s:1"}, "overlap on svc"},
		{[]string{"svc-clock@5s+2s:0=+1s", "svc-pause@6s+1s:0"}, "overlap on svc"},
		{[]string{"redis-pause@5s+3s", "nonsense"}, `fault "nonsense"`},
	}
	for _, b := range bad {
		if _, err := ParsePlan(b.specs); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("ParsePlan(%q): %v, want %q", b.specs, err, b.want)
		}
	}
	// Back to back on one target, or at once on two, is fine.
	for _, ok := range [][]string{{"redis-pause@5s+3s", "redis-restart@8s"}, {"redis-pause@5s+3s", "mysql-pause@5s+3s", "app-crash@5s"}, {"svc-kill@5s+2s:0", "svc-kill@5s+2s:1"}, {"svc-clock@1s:0=+2s", "svc-kill@3s:0", "svc-pause@4s+1s"}} {
		if _, err := ParsePlan(ok); err != nil {
			t.Errorf("ParsePlan(%q): %v", ok, err)
		}
	}
}

func TestPlanFor(t *testing.T) {
	net, _ := ParsePlan([]string{"latency:redis=20ms@1s+2s", "reset:mysql@1s", "partition:mysql@3s+1s", "app-crash@2s"})
	for _, b := range []string{"external", "local", "docker"} {
		if err := net.For(b); err != nil {
			t.Errorf("network plan on %s: %v", b, err)
		}
	}
	for _, spec := range []string{"redis-pause@1s+1s", "mysql-restart@1s"} {
		p, _ := ParsePlan([]string{spec})
		if err := p.For("local"); err != nil {
			t.Errorf("%s on local: %v", spec, err)
		}
		if err := p.For("external"); err == nil || !strings.Contains(err.Error(), "only network faults") {
			t.Errorf("%s on external: %v", spec, err)
		}
	}
}
