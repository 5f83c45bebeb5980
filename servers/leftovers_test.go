package servers

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stockbench/stockbench/internal/waitfor"
)

// TestSweepLocal: only data directories whose owner is provably gone are
// removed; a live owner's, an unknown owner's, and one a live server still
// names are kept.
func TestSweepLocal(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	// A pid that was ours and has ended.
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	deadPID := strconv.Itoa(dead.Process.Pid)
	me := strconv.Itoa(os.Getpid())
	myStart, err := procStart(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// A live process that names its directory on its command line, as a
	// server that outlived its owner would.
	busyDir := filepath.Join(tmp, "stockbench-mysql-busy")
	holder := exec.Command("sh", "-c", "read x", busyDir)
	stdin, err := holder.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); holder.Wait() }()
	// The case's premise is an event, not a moment: a process runs whose
	// command line names the directory. On a loaded machine the holder may
	// not show there yet when Start returns; wait until it does.
	waitfor.Until(t, "the holder never named its directory in /proc", func() bool { return inUse(busyDir) })

	cases := []struct {
		dir   string
		owner string // content of the owner file; "-" for none
		kept  bool
	}{
		{"stockbench-mysql-dead", deadPID + " 1", false},
		{"stockbench-redis-dead", deadPID + " 1", false},
		{"stockbench-mysql-live", me + " " + myStart, true},
		{"stockbench-redis-reused-pid", me + " 1", false}, // our pid, another start time: the owner is gone
		{"stockbench-mysql-unknown", "-", true},           // no owner file and recent: maybe a run creating it
		{"stockbench-redis-legacy", "old", false},         // no owner file, untouched for days: an older stockbench's leftover
		{"stockbench-mysql-busy", deadPID + " 1", true},
		{"unrelated-dir", deadPID + " 1", true},
	}
	for _, c := range cases {
		d := filepath.Join(tmp, c.dir)
		if err := os.MkdirAll(filepath.Join(d, "data"), 0o700); err != nil {
			t.Fatal(err)
		}
		if c.owner == "old" {
			old := time.Now().Add(-72 * time.Hour)
			if err := os.Chtimes(d, old, old); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if c.owner != "-" {
			if err := os.WriteFile(filepath.Join(d, ownerFile), []byte(c.owner+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	removed, err := SweepLocal()
	if err != nil {
		t.Fatal(err)
	}
	if !inUse(busyDir) {
		t.Fatalf("the holder of %s ended during the sweep: the busy case proves nothing", busyDir)
	}
	for _, c := range cases {
		_, err := os.Stat(filepath.Join(tmp, c.dir))
		if kept := err == nil; kept != c.kept {
			t.Errorf("%s: kept=%v, want %v (removed %v)", c.dir, kept, c.kept, removed)
		}
	}
	// writeOwner names this process: its directory survives a sweep.
	d, err := os.MkdirTemp("", "stockbench-redis-")
	if err != nil {
		t.Fatal(err)
	}
	if err := writeOwner(d); err != nil {
		t.Fatal(err)
	}
	if _, err := SweepLocal(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(d); err != nil {
		t.Fatalf("a live owner's directory was removed")
	}
}
