package runner

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
)

// CoreLines counts the non-blank, non-comment lines of the non-test .go,
// .lua and .sql files in dirs (relative to the module root, found by walking
// up from the working directory). It returns 0 when the source is not there,
// as for a binary run outside its checkout.
func CoreLines(dirs []string) int {
	root := moduleRoot()
	if root == "" {
		return 0
	}
	n := 0
	for _, d := range dirs {
		entries, err := os.ReadDir(filepath.Join(root, d))
		if err != nil {
			return 0
		}
		for _, e := range entries {
			name := e.Name()
			if e.IsDir() || strings.HasSuffix(name, "_test.go") {
				continue
			}
			switch filepath.Ext(name) {
			case ".go":
				n += countLines(filepath.Join(root, d, name), "//")
			case ".lua", ".sql":
				n += countLines(filepath.Join(root, d, name), "--")
			}
		}
	}
	return n
}

func countLines(path, comment string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
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
	return n
}

const modulePath = "github.com/stockbench/stockbench"

func moduleRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.Contains(string(b), "module "+modulePath+"\n") {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}
