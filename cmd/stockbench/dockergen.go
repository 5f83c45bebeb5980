package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/stockbench/stockbench/servers"
)

// How run --procs N starts its generators (--generators).
const (
	generatorsProcess = "process"
	generatorsDocker  = "docker"
)

// generatorContainerEnv names, in a docker generator's environment, its
// container: the generator records it in its shard's results.
const generatorContainerEnv = "STOCKBENCH_GENERATOR_CONTAINER"

// generatorImageEnv overrides the image docker generators run in.
const generatorImageEnv = "STOCKBENCH_GENERATOR_IMAGE"

// lifelineEnv, set in a docker generator's environment, makes it exit
// when its standard input ends: the parent holds the other end, so a
// parent that dies (or is killed) takes its containers with it.
const lifelineEnv = "STOCKBENCH_STDIN_LIFELINE"

// containerExe is where the binary is mounted in a generator's container.
const containerExe = "/usr/local/bin/stockbench"

// watchLifeline exits the process when stdin ends, if lifelineEnv asks.
func watchLifeline(stderr io.Writer) {
	if os.Getenv(lifelineEnv) != "1" {
		return
	}
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		fmt.Fprintln(stderr, "stockbench: the parent of this generator is gone; stopping")
		os.Exit(exitInterrupted)
	}()
}

// generatorImage checks that docker generators can run here and picks
// their image: STOCKBENCH_GENERATOR_IMAGE, else the first present of the
// offline MariaDB image and the official MySQL one (images the docker
// backend already uses; nothing is pulled). The engine must share this
// machine's network (host networking reaches servers on 127.0.0.1), and
// exe must run in the image: it is started there once with `version`.
func generatorImage(exe string) (string, error) {
	if _, err := exec.LookPath("docker"); err != nil {
		return "", errors.New("the docker command is not installed")
	}
	d, err := servers.NewDocker("", "")
	if err != nil {
		return "", err
	}
	if d.Network != servers.NetworkHost {
		return "", errors.New("the Docker engine does not share this machine's network (Docker Desktop, rootless or remote): generators could not reach the servers")
	}
	image := os.Getenv(generatorImageEnv)
	if image == "" {
		for _, im := range []string{servers.OfflineMySQLImage, servers.DefaultMySQLImage} {
			if exec.Command("docker", "image", "inspect", im).Run() == nil {
				image = im
				break
			}
		}
	}
	if image == "" {
		return "", fmt.Errorf("neither %s nor %s is present (make images-offline builds the first; or set %s)",
			servers.OfflineMySQLImage, servers.DefaultMySQLImage, generatorImageEnv)
	}
	var out bytes.Buffer
	cmd := exec.Command("docker", "run", "--rm", "--network", "none", "--user", user(), "--label", servers.Label+"=1",
		"--label", servers.LabelPID+"="+strconv.Itoa(os.Getpid()), "-v", exe+":"+containerExe+":ro",
		"-e", shardChildEnv+"=1", "--entrypoint", containerExe, image, "version")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s does not run in image %s (a static build, CGO_ENABLED=0, runs anywhere): %v: %s", exe, image, err, lastLine(out.String()))
	}
	return image, nil
}

// user is this process's uid:gid, which the generators run as: the files
// they write are the user's.
func user() string { return fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid()) }

// dockerCommand is the docker CLI starting one generator as container
// name: image, host networking (the servers answer on 127.0.0.1) and the
// host's pid namespace (so that it can sample local servers' CPU, and its
// pid in the report is a real one), exe mounted read-only, the working
// directory read-only (relative paths such as -f resolve as here), the
// shard's output directory read-write, env passed by name (the docker CLI
// reads the values from its own environment: no password on a command
// line). It carries the stockbench labels, so stockbench down removes a
// leftover. Its stdin is a pipe whose write end, lifeline, the parent
// holds: when the parent dies, the container's stdin ends and the
// generator exits (watchLifeline); Ctrl-C reaches it through the CLI's
// signal proxy. The container removes itself when it ends.
func dockerCommand(ctx context.Context, image, exe, name, dir string, env, args []string) (*exec.Cmd, *os.File, error) {
	cwd, err := os.Getwd()
	if err != nil {
		return nil, nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	env = append(env, lifelineEnv+"=1", generatorContainerEnv+"="+name)
	dargs := []string{"run", "--rm", "-i", "--sig-proxy=true", "--name", name, "--network", "host", "--pid", "host",
		"--user", user(), "--label", servers.Label + "=1", "--label", servers.LabelPID + "=" + strconv.Itoa(os.Getpid()),
		"-v", exe + ":" + containerExe + ":ro", "-v", abs + ":" + abs}
	if cwd != "/" {
		// (The host's root over the image's would leave it no system.)
		dargs = append(dargs, "-v", cwd+":"+cwd+":ro", "-w", cwd)
	}
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		dargs = append(dargs, "-e", k)
	}
	dargs = append(dargs, "--entrypoint", containerExe, image)
	// The output directory as the container sees it.
	for i, a := range args {
		if a == "--out" && i+1 < len(args) && args[i+1] == dir {
			args[i+1] = abs
		}
	}
	cmd := exec.CommandContext(ctx, "docker", append(dargs, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = r
	return cmd, w, nil
}

// removeContainer removes a generator's container if it is still there
// (the CLI was killed before the container ended).
func removeContainer(name string) {
	_ = exec.Command("docker", "rm", "-f", name).Run()
}
