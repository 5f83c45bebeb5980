package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updateDocs = flag.Bool("update", false, "rewrite docs/flags.md from the commands' -h")

// flagsDocCommands are the commands docs/flags.md documents, in its order.
var flagsDocCommands = []string{"run", "sweep", "curve", "faults", "calibrate", "audit", "report", "compare", "merge", "prepare", "down", "version"}

// flagsDoc is docs/flags.md: every command's -h, as the binary prints it.
func flagsDoc(t *testing.T) []byte {
	var b bytes.Buffer
	b.WriteString("# Flags\n\nWhat `stockbench COMMAND -h` prints, for every command. Generated from the\nbinary's own help by `go test ./cmd/stockbench -run TestFlagsDoc -update`;\nthe test fails when this file and the help disagree.\n")
	for _, cmd := range flagsDocCommands {
		var out, errb bytes.Buffer
		if code := Main(context.Background(), []string{cmd, "-h"}, &out, &errb); code != exitOK {
			t.Fatalf("%s -h: exit %d: %s", cmd, code, errb.String())
		}
		b.WriteString("\n## " + cmd + "\n\n```\n" + strings.TrimRight(out.String(), "\n") + "\n```\n")
	}
	return b.Bytes()
}

// TestFlagsDoc: docs/flags.md is what the commands' -h print, so the flag
// reference cannot drift from the binary.
func TestFlagsDoc(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "flags.md")
	got := flagsDoc(t)
	if *updateDocs {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./cmd/stockbench -run TestFlagsDoc -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("docs/flags.md differs from the commands' -h: run go test ./cmd/stockbench -run TestFlagsDoc -update")
	}
}
