package main

import (
	"bytes"
	"context"
	"flag"
	"path/filepath"
	"strings"
	"testing"
)

// TestBadRTT: a network profile the harness cannot build is refused before
// any server starts, in one line, with exit 2 — on run and on sweep.
func TestBadRTT(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"negative", []string{"run", "--rtt", "-1ms"}, "negative"},
		{"negative per store", []string{"run", "--rtt", "mysql=1ms,redis=-0.2ms"}, "negative"},
		{"jitter above rtt", []string{"run", "--rtt", "1ms±2ms"}, "larger than the RTT"},
		{"unknown profile", []string{"run", "--rtt", "same-region"}, "unknown network profile"},
		{"unknown store", []string{"run", "--rtt", "postgres=1ms"}, "unknown store"},
		{"sweep value", []string{"sweep", "--param", "rtt=0,0.5ms,-1ms"}, "negative"},
		{"sweep unknown", []string{"sweep", "--param", "rtt=0,zone"}, "unknown network profile"},
		{"docker negative", []string{"run", "--backend", "docker", "--rtt", "-1ms"}, "negative"},
		{"docker jitter above rtt", []string{"run", "--backend", "docker", "--rtt", "0.5ms±1ms"}, "larger than the RTT"},
		{"docker unknown profile", []string{"run", "--backend", "docker", "--rtt", "cross-region"}, "unknown network profile"},
		{"docker sweep value", []string{"sweep", "--backend", "docker", "--param", "rtt=0,1ms+-2ms"}, "larger than the RTT"},
		{"docker cluster", []string{"run", "--backend", "docker", "--redis-cluster", "3", "--rtt", "1ms"}, "single servers"},
		{"local negative", []string{"run", "--backend", "local", "--rtt", "-0.5"}, "negative"},
		{"local jitter above rtt", []string{"run", "--backend", "local", "--rtt", "1ms±1.5ms"}, "larger than the RTT"},
		{"local unknown profile", []string{"run", "--backend", "local", "--rtt", "lan"}, "unknown network profile"},
		{"external backend", []string{"run", "--backend", "external", "--mysql-dsn", "root@tcp(127.0.0.1:1)/x", "--redis-addr", "127.0.0.1:1", "--rtt", "1ms"}, "external"},
		{"cluster", []string{"run", "--backend", "local", "--redis-cluster", "3", "--rtt", "1ms"}, "single servers"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Main(context.Background(), append(c.args, "--quiet", "--out", out), &stdout, &stderr)
			msg := stderr.String()
			if code != exitUsage {
				t.Fatalf("exit %d, want %d; stderr %q", code, exitUsage, msg)
			}
			if !strings.Contains(msg, c.want) {
				t.Fatalf("stderr %q does not say %q", msg, c.want)
			}
			if strings.Count(msg, "\n") != 1 {
				t.Fatalf("error is not one line: %q", msg)
			}
		})
	}
}

// TestPresetNetwork: the article preset models a same-zone network where
// the run's servers can sit behind one, and leaves the network alone where
// they cannot (docker, external).
func TestPresetNetwork(t *testing.T) {
	cases := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{args: nil, want: "same-zone"},
		{args: []string{"--backend", "local"}, want: "same-zone"},
		{args: []string{"--rtt", "1ms"}, want: "1ms"},
		{args: []string{"--backend", "docker"}, want: ""},
		{args: []string{"--backend", "external"}, want: ""},
		{env: map[string]string{"STOCKBENCH_MYSQL_DSN": "root@tcp(127.0.0.1:1)/x"}, want: ""},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " ")+strings.Join(mapKeys(c.env), ""), func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			fs := flag.NewFlagSet("run", flag.ContinueOnError)
			var f runFlags
			f.register(fs)
			if err := fs.Parse(append(c.args, "--preset", "article")); err != nil {
				t.Fatal(err)
			}
			o, err := f.resolve(fs)
			if err != nil {
				t.Fatal(err)
			}
			if got := o.Network.String(); got != c.want {
				t.Fatalf("network %q, want %q", got, c.want)
			}
		})
	}
}

func mapKeys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
