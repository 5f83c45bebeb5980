package loc

import (
	"os"
	"path/filepath"
	"testing"
)

// TestDir counts a directory of known files: comments, blank lines, block
// comments, test files and other extensions are not code.
func TestDir(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"a.go":      "package a\n\n// doc\nfunc A() {}\n/* block\nstill block */\nvar x = 1\n",
		"a_test.go": "package a\nfunc TestA() {}\n",
		"s.lua":     "-- comment\nlocal x = 1\n\nreturn x\n",
		"s.sql":     "-- table\nCREATE TABLE t (a INT);\n",
		"README.md": "# not code\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// a.go: package, func, var = 3; s.lua: 2; s.sql: 1.
	if n, err := Dir(dir); err != nil || n != 6 {
		t.Fatalf("Dir = %d, %v; want 6", n, err)
	}
	if _, err := Dir(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("a missing directory counted without error")
	}
}
