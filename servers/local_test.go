package servers

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLocalStartStop starts real servers through the local provider, checks
// they answer, and checks Stop leaves no process and no data dir behind.
func TestLocalStartStop(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	l, err := NewLocal()
	if err != nil {
		t.Fatalf("local backend unavailable: %v", err)
	}
	ctx := context.Background()
	ep, err := l.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dirs := append([]string(nil), l.dirs...)
	if err := Ping(ctx, ep, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if ep.MySQLPID == 0 || ep.RedisPID == 0 {
		t.Fatalf("pids not reported: %+v", ep)
	}
	if err := l.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range []int{ep.MySQLPID, ep.RedisPID} {
		if syscall.Kill(pid, 0) == nil {
			t.Errorf("process %d still running after Stop", pid)
		}
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("data dir %s left behind", d)
		}
	}
	if err := l.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

func TestNewProvider(t *testing.T) {
	cases := []struct {
		name    string
		opts    Options
		wantErr string // substring; empty means success
	}{
		{"unknown backend", Options{Backend: "cloud"}, "unknown backend"},
		{"external without dsn", Options{Backend: "external", RedisAddr: "127.0.0.1:1"}, "needs MySQLDSN"},
		{"auto with half external", Options{Backend: "auto", MySQLDSN: "root@tcp(127.0.0.1:1)/x"}, "both"},
		{"external complete", Options{Backend: "external", MySQLDSN: "root@tcp(127.0.0.1:1)/x", RedisAddr: "127.0.0.1:1"}, ""},
		{"auto prefers external", Options{Backend: "auto", MySQLDSN: "root@tcp(127.0.0.1:1)/x", RedisAddr: "127.0.0.1:1"}, ""},
		// Refused before any engine is asked.
		{"galera on docker", Options{Backend: "docker", MySQLCluster: 3}, "the official mysql image has no Galera"},
		{"negative galera on docker", Options{Backend: "docker", MySQLCluster: -1}, "MySQLCluster -1"},
		{"negative redis cluster on docker", Options{Backend: "docker", RedisCluster: -1}, "RedisCluster -1"},
		{"negative redis cluster on local", Options{Backend: "local", RedisCluster: -1}, "RedisCluster -1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := New(c.opts)
			if c.wantErr == "" && err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			if c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
				t.Fatalf("error %v, want it to contain %q", err, c.wantErr)
			}
		})
	}
}

// TestExternalUnreachable: a server that does not answer is one clear error.
func TestExternalUnreachable(t *testing.T) {
	if testing.Short() {
		t.Skip("needs servers; not in the -short tier")
	}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	e := &External{DSN: fmt.Sprintf("root:secret@tcp(127.0.0.1:%d)/x", port), Addr: "127.0.0.1:1"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = e.Start(ctx)
	if err == nil || !strings.Contains(err.Error(), "does not answer") {
		t.Fatalf("got %v", err)
	}
	if strings.Contains(err.Error(), "secret") {
		t.Fatalf("password leaked in error: %v", err)
	}
}

func TestRedactDSN(t *testing.T) {
	got := RedactDSN("root:hunter2@tcp(127.0.0.1:3306)/db")
	if strings.Contains(got, "hunter2") || !strings.Contains(got, "***") {
		t.Fatalf("RedactDSN = %q", got)
	}
}

func TestLastLine(t *testing.T) {
	cases := []struct{ in, want string }{
		{"a\n[ERROR] Can't find file x\n[ERROR] Aborting\n", "[ERROR] Can't find file x"}, // the cause, not the generic abort
		{"starting\nready\n", "ready"}, // no error: last line
		{"[ERROR] Aborting", "[ERROR] Aborting"},
		{"[Note] WSREP: Running: 'wsrep_sst_rsync --log-error=/d/error.log'\n[ERROR] WSREP: Failed to read 'ready <addr>'\n", "[ERROR] WSREP: Failed to read 'ready <addr>'"}, // an option's name is no error
	}
	for _, c := range cases {
		if got := lastLine([]byte(c.in)); got != c.want {
			t.Errorf("lastLine(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestListenRange(t *testing.T) {
	cases := []struct{ low, lo, hi int }{
		{32768, 16384, 32768}, // Linux's default ephemeral range
		{49152, 32768, 49152}, // the IANA range
		{10000, 1024, 10000},  // a low range: never a privileged port
		{1024, 1024, 2048},    // nothing below it: still a range
	}
	for _, c := range cases {
		if lo, hi := listenRange(c.low); lo != c.lo || hi != c.hi {
			t.Errorf("listenRange(%d) = %d, %d, want %d, %d", c.low, lo, hi, c.lo, c.hi)
		}
	}
}
