// Package loc counts lines of code: the non-blank, non-comment lines of the
// non-test .go, .lua and .sql files of a directory. The strategy registry
// keeps these counts for each strategy's code ("core lines" in the report),
// generated at build time by ./cmd/corelines so that any copy of the binary
// knows them.
package loc

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Dir counts the core lines of the files directly in dir (not its
// subdirectories), but for the files named in skip (paths as dir joined
// with the file's name).
func Dir(dir string, skip ...string) (int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("count lines: %w", err)
	}
	n := 0
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || strings.HasSuffix(name, "_test.go") || slices.Contains(skip, filepath.Join(dir, name)) {
			continue
		}
		var c int
		switch filepath.Ext(name) {
		case ".go":
			c, err = countFile(filepath.Join(dir, name), "//")
		case ".lua", ".sql":
			c, err = countFile(filepath.Join(dir, name), "--")
		default:
			continue
		}
		if err != nil {
			return 0, err
		}
		n += c
	}
	return n, nil
}

// countFile counts the lines of one file that are neither blank nor
// comments (line comments starting with comment; for Go also /* */ blocks).
func countFile(path, comment string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("count lines: %w", err)
	}
	defer f.Close()
	n, inBlock := 0, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case inBlock:
			inBlock = !strings.Contains(line, "*/")
		case line == "" || strings.HasPrefix(line, comment):
		case comment == "//" && strings.HasPrefix(line, "/*"):
			inBlock = !strings.Contains(line, "*/")
		default:
			n++
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("count lines of %s: %w", path, err)
	}
	return n, nil
}

// Counts counts each of paths, given relative to root: a directory's
// files, or one file (.go, .lua, .sql). A file named on its own is not
// counted in its directory's count: it is code a strategy runs only when
// an option turns it on, counted apart.
func Counts(root string, paths []string) (map[string]int, error) {
	out := make(map[string]int, len(paths))
	var files []string
	for _, p := range paths {
		if filepath.Ext(p) != "" {
			files = append(files, filepath.Join(root, p))
		}
	}
	for _, p := range paths {
		var n int
		var err error
		switch full := filepath.Join(root, p); filepath.Ext(p) {
		case "":
			n, err = Dir(full, files...)
		case ".go":
			n, err = countFile(full, "//")
		default:
			n, err = countFile(full, "--")
		}
		if err != nil {
			return nil, err
		}
		out[p] = n
	}
	return out, nil
}
