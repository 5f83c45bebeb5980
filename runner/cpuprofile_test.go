package runner

import (
	"os"
	"path/filepath"
	"testing"
)

// STOCKBENCH_CPUPROFILE_DIR=DIR writes one readable CPU profile per run,
// numbered so that none overwrites another; unset, it writes nothing.
func TestCPUProfile(t *testing.T) {
	cases := []struct {
		name  string
		set   bool
		files int
	}{
		{"unset", false, 0},
		{"set", true, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if c.set {
				t.Setenv(cpuProfileEnv, dir)
			} else {
				t.Setenv(cpuProfileEnv, "")
			}
			for range 2 {
				stop := startCPUProfile("s")
				stop()
			}
			got, err := filepath.Glob(filepath.Join(dir, "cpu-*-s.prof"))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != c.files {
				t.Fatalf("profiles %v, want %d", got, c.files)
			}
			for _, p := range got {
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
					t.Errorf("%s: not a gzipped profile", p)
				}
			}
		})
	}
}
