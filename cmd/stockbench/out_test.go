package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLinkLatest: reports/latest follows the newest run directory, is
// replaced, not written through, and a real directory of an older version
// is left alone with a note.
func TestLinkLatest(t *testing.T) {
	cases := []struct {
		name     string
		before   func(root string)
		wantNote string // "" when the link must now point at the run
	}{
		{"no latest yet", func(string) {}, ""},
		{"latest points at an older run", func(root string) {
			os.MkdirAll(filepath.Join(root, "old"), 0o755)
			os.Symlink("old", filepath.Join(root, "latest"))
		}, ""},
		{"latest is a directory", func(root string) { os.MkdirAll(filepath.Join(root, "latest"), 0o755) }, "left as it is"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			c.before(root)
			dir := newRunDir(root)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			note := linkLatest(root, dir)
			if c.wantNote != "" {
				if !strings.Contains(note, c.wantNote) {
					t.Fatalf("note %q, want %q", note, c.wantNote)
				}
				return
			}
			if note != "" {
				t.Fatalf("note %q", note)
			}
			got, err := os.Readlink(filepath.Join(root, "latest"))
			if err != nil || got != filepath.Base(dir) {
				t.Fatalf("latest -> %q (%v), want %q", got, err, filepath.Base(dir))
			}
			if _, err := os.Stat(filepath.Join(root, "old")); c.name == "latest points at an older run" && err != nil {
				t.Fatalf("the older run's directory went: %v", err)
			}
		})
	}
}
