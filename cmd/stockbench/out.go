package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
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

// reportsRoot holds a directory per run when --out is not given, and
// "latest", a link to the newest.
const reportsRoot = "reports"

// newRunDir names a new run directory under root: the start time to the
// second and the process id, so two runs started together differ.
func newRunDir(root string) string {
	return filepath.Join(root, time.Now().Format("20060102-150405")+"-"+strconv.Itoa(os.Getpid()))
}

// linkLatest points root/latest at dir (atomically: a new link renamed
// over the old). It says why in one line when it cannot — a latest that
// is a real directory (written by an older version) is left alone.
func linkLatest(root, dir string) string {
	latest := filepath.Join(root, "latest")
	if st, err := os.Lstat(latest); err == nil && st.Mode()&os.ModeSymlink == 0 {
		return fmt.Sprintf("%s is a directory of an earlier version's run, left as it is; this report is in %s", latest, dir)
	}
	tmp := latest + ".new-" + strconv.Itoa(os.Getpid())
	os.Remove(tmp)
	if err := os.Symlink(filepath.Base(dir), tmp); err != nil {
		return fmt.Sprintf("cannot point %s at %s: %v", latest, dir, err)
	}
	if err := os.Rename(tmp, latest); err != nil {
		os.Remove(tmp)
		return fmt.Sprintf("cannot point %s at %s: %v", latest, dir, err)
	}
	return ""
}
