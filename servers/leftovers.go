package servers

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ownerFile, inside each local data directory, names the process that
// made it: its pid and its start time (so a reused pid is not mistaken for
// the owner).
const ownerFile = "stockbench-owner"

// localDirPatterns match the temporary directories stockbench makes: the
// local provider's data directories, the docker provider's config files,
// a run's ack log and its service's own disk (outbox-local's database).
var localDirPatterns = []string{"stockbench-mysql-*", "stockbench-redis-*", "stockbench-docker-*",
	"stockbench-acks-*", "stockbench-local-*", "stockbench-outbox-local-*", newPrefix + "*"}

// MkdirTemp creates a new directory under the temp dir as os.MkdirTemp
// does (pattern should match one of localDirPatterns), and records this
// process as its owner, so that once this process is gone — killed before
// it could remove it — `stockbench down` and the next run remove it.
//
// The directory appears under its name with its owner file already inside:
// it is made under a hidden name (newPrefix, which a sweep also reads),
// the owner written, and then renamed into place without replacing
// anything. A process killed between the two steps leaves no directory
// that looks ownerless (one a sweep would keep for legacyAge).
func MkdirTemp(pattern string) (string, error) {
	tmp, err := os.MkdirTemp("", newPrefix+pattern)
	if err != nil {
		return "", err
	}
	if err := writeOwner(tmp); err != nil {
		_ = os.RemoveAll(tmp)
		return "", fmt.Errorf("temp dir owner: %w", err)
	}
	prefix, suffix, _ := strings.Cut(pattern, "*")
	for try := 0; ; try++ {
		d := filepath.Join(os.TempDir(), prefix+strconv.FormatUint(uint64(rand.Uint32()), 10)+suffix)
		err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, d, unix.RENAME_NOREPLACE)
		if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL) {
			// A file system without RENAME_NOREPLACE: look, then rename
			// (the name is random; a clash in between is improbable).
			if _, serr := os.Lstat(d); serr == nil {
				err = unix.EEXIST
			} else {
				err = os.Rename(tmp, d)
			}
		}
		if err == nil {
			return d, nil
		}
		if !errors.Is(err, unix.EEXIST) || try == 100 {
			_ = os.RemoveAll(tmp)
			return "", fmt.Errorf("temp dir %s: %w", pattern, err)
		}
	}
}

// newPrefix starts the hidden name MkdirTemp makes a directory under
// before its owner file is in it.
const newPrefix = ".stockbench-new-"

// writeOwner records this process as the owner of dir.
func writeOwner(dir string) error {
	st, err := procStart(os.Getpid())
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ownerFile), []byte(fmt.Sprintf("%d %s\n", os.Getpid(), st)), 0o600)
}

// procStart is a process's start time in clock ticks since boot, from
// /proc/PID/stat; it tells a live owner from a later process with its pid.
func procStart(pid int) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", errors.New("unreadable /proc stat")
	}
	f := strings.Fields(s[i+1:])
	// Field 22 of stat is the start time; f starts at field 3.
	if len(f) < 20 {
		return "", errors.New("short /proc stat")
	}
	return f[19], nil
}

// legacyAge is how long a data directory without an owner file (made by a
// stockbench from before owner files, or one a run is creating this very
// moment) must have been left untouched before a sweep may remove it.
const legacyAge = time.Hour

// ownerAlive reports whether the process named by dir's owner file still
// runs. A directory without a readable owner file counts as alive unless it
// was last modified more than legacyAge ago.
func ownerAlive(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, ownerFile))
	if err != nil {
		st, serr := os.Stat(dir)
		return serr != nil || time.Since(st.ModTime()) < legacyAge
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return true
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil {
		return true
	}
	st, err := procStart(pid)
	return err == nil && st == f[1]
}

// processAlive reports whether a process with this pid runs (a reused pid
// counts as alive: what is kept is only left for a later sweep).
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// inUse reports whether a live process names dir on its command line (a
// server that outlived its owner still works in it). When /proc cannot be
// listed whole, it cannot tell, and says the directory is in use: a sweep
// keeps what it is unsure of.
func inUse(dir string) bool {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + p.Name() + "/cmdline")
		if err == nil && strings.Contains(string(b), dir) {
			return true
		}
	}
	return false
}

// SweepLocal removes the temporary directories (data directories, config
// files, ack logs, a service's local disk; localDirPatterns) of runs
// whose process is gone (killed before it could clean up), and
// returns them. A directory whose owner lives, that a live server still
// names, or whose owner is unknown and that changed within the last hour,
// is left alone.
func SweepLocal() ([]string, error) {
	var removed []string
	var errs []error
	for _, pat := range localDirPatterns {
		dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), pat))
		for _, d := range dirs {
			if st, err := os.Stat(d); err != nil || !st.IsDir() || ownerAlive(d) || inUse(d) {
				continue
			}
			if err := os.RemoveAll(d); err != nil {
				errs = append(errs, fmt.Errorf("remove %s: %w", d, err))
				continue
			}
			removed = append(removed, d)
		}
	}
	return removed, errors.Join(errs...)
}

// DockerAvailable reports whether a Docker engine answers.
func DockerAvailable() bool {
	_, err := dockerPool()
	return err == nil
}
