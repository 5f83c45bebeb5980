package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// checkOut tells before any server starts whether the results directory
// can be written: it must be a directory, or not exist under a directory
// this process can create files in. It creates nothing that stays.
func checkOut(dir string) error {
	p := filepath.Clean(dir)
	for {
		st, err := os.Stat(p)
		if err == nil {
			if !st.IsDir() {
				return fmt.Errorf("--out %s: %s is not a directory", dir, p)
			}
			f, err := os.CreateTemp(p, ".stockbench-write-check-*")
			if err != nil {
				return fmt.Errorf("--out %s: cannot write in %s: %w", dir, p, errors.Unwrap(err))
			}
			f.Close()
			return os.Remove(f.Name())
		}
		if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("--out %s: %w", dir, err)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return fmt.Errorf("--out %s: no existing parent directory", dir)
		}
		p = parent
	}
}
