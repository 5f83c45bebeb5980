package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// k8sContainer is one stockbench container of a manifest in deploy/k8s.
type k8sContainer struct {
	file, job, name string
	// completions and parallelism of its Job (1 when unset).
	completions, parallelism int
	args                     []string
	// env: literal values; fromK8s: set by Kubernetes (Secret, downward API).
	env     map[string]string
	fromK8s map[string]bool
}

// k8sContainers reads every manifest under deploy/k8s and returns the
// containers whose command is stockbench.
func k8sContainers(t *testing.T) []k8sContainer {
	t.Helper()
	files, err := filepath.Glob("../../deploy/k8s/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in deploy/k8s: %v", err)
	}
	type container struct {
		Name    string   `yaml:"name"`
		Command []string `yaml:"command"`
		Args    []string `yaml:"args"`
		Env     []struct {
			Name      string         `yaml:"name"`
			Value     *string        `yaml:"value"`
			ValueFrom map[string]any `yaml:"valueFrom"`
		} `yaml:"env"`
		EnvFrom []map[string]any `yaml:"envFrom"`
	}
	type doc struct {
		Kind     string `yaml:"kind"`
		Metadata struct {
			Name string `yaml:"name"`
		} `yaml:"metadata"`
		Spec struct {
			Completions *int `yaml:"completions"`
			Parallelism *int `yaml:"parallelism"`
			Template    struct {
				Spec struct {
					InitContainers []container `yaml:"initContainers"`
					Containers     []container `yaml:"containers"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	var out []k8sContainer
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d doc
		if err := yaml.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if d.Kind != "Job" {
			continue
		}
		for _, c := range append(d.Spec.Template.Spec.InitContainers, d.Spec.Template.Spec.Containers...) {
			if len(c.Command) == 0 || filepath.Base(c.Command[0]) != "stockbench" {
				t.Errorf("%s: container %s does not run stockbench: %v", f, c.Name, c.Command)
				continue
			}
			kc := k8sContainer{file: filepath.Base(f), job: d.Metadata.Name, name: c.Name, completions: 1, parallelism: 1,
				args: append(c.Command[1:], c.Args...), env: map[string]string{}, fromK8s: map[string]bool{}}
			if d.Spec.Completions != nil {
				kc.completions = *d.Spec.Completions
			}
			if d.Spec.Parallelism != nil {
				kc.parallelism = *d.Spec.Parallelism
			}
			for _, e := range c.Env {
				if e.Value != nil {
					kc.env[e.Name] = *e.Value
				} else {
					kc.fromK8s[e.Name] = true
				}
			}
			if len(c.EnvFrom) > 0 {
				// The Secret's keys: the servers.
				kc.fromK8s["STOCKBENCH_MYSQL_DSN"], kc.fromK8s["STOCKBENCH_REDIS_URL"] = true, true
			}
			out = append(out, kc)
		}
	}
	return out
}

var k8sVar = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// expand substitutes $(VAR) as Kubernetes does, for pod index: the Job
// controller's JOB_COMPLETION_INDEX, the container's literal env, and a
// stand-in for what Kubernetes sets (Secret, downward API). A reference
// to anything else would reach stockbench as is: an error.
func (c k8sContainer) expand(t *testing.T, index int) []string {
	t.Helper()
	var out []string
	for _, a := range c.args {
		out = append(out, k8sVar.ReplaceAllStringFunc(a, func(m string) string {
			name := k8sVar.FindStringSubmatch(m)[1]
			if v, ok := c.env[name]; ok {
				return v
			}
			if name == "JOB_COMPLETION_INDEX" && c.completions > 1 {
				return strconv.Itoa(index)
			}
			if c.fromK8s[name] {
				return "set-by-kubernetes"
			}
			t.Errorf("%s %s: $(%s) is not in its environment: it would reach stockbench unexpanded", c.file, c.name, name)
			return m
		}))
	}
	return out
}

// shardOnly are the run flags a generator has and prepare has not, with
// whether they take a value.
var shardOnly = map[string]bool{"--shard": true, "--no-reset": false, "--start-barrier": true, "--out": true}

// TestK8sManifests: every stockbench command line in deploy/k8s parses
// with the real flag sets and passes their checks, for every pod index,
// and the steps fit together — prepare and the generators take the same
// run flags, the shards are I/N of N pods running at once, merge reads
// exactly the generators' outputs, the audit reads merge's acks — and no
// server address or password is on a command line.
func TestK8sManifests(t *testing.T) {
	cs := k8sContainers(t)
	steps := []struct {
		file, container, command string
	}{
		{"10-prepare-job.yaml", "prepare", "prepare"},
		{"20-generators-job.yaml", "generator", "run"},
		{"30-merge-audit-job.yaml", "merge", "merge"},
		{"30-merge-audit-job.yaml", "audit", "audit"},
	}
	if len(cs) != len(steps) {
		t.Errorf("%d stockbench containers in deploy/k8s, want the %d steps below", len(cs), len(steps))
	}
	byCommand := map[string]k8sContainer{}
	for _, st := range steps {
		t.Run(st.file+" "+st.container, func(t *testing.T) {
			i := slices.IndexFunc(cs, func(c k8sContainer) bool { return c.file == st.file && c.name == st.container })
			if i < 0 {
				t.Fatalf("no container %s in %s", st.container, st.file)
			}
			c := cs[i]
			byCommand[st.command] = c
			for index := range c.completions {
				args := c.expand(t, index)
				if len(args) == 0 || args[0] != st.command {
					t.Fatalf("runs %v, want stockbench %s", args, st.command)
				}
				for _, a := range args {
					if strings.Contains(a, "@tcp(") || strings.Contains(a, "redis://") || strings.Contains(a, "rediss://") {
						t.Fatalf("a server address on the command line: %q (the Secret gives them)", a)
					}
				}
				if err := parseK8sCommand(args, c); err != nil {
					t.Fatalf("pod %d: stockbench %s: %v", index, strings.Join(args, " "), err)
				}
			}
		})
	}
	prep, gen, merge, aud := byCommand["prepare"], byCommand["run"], byCommand["merge"], byCommand["audit"]
	if gen.args == nil || prep.args == nil || merge.args == nil || aud.args == nil {
		t.Fatal("a step is missing")
	}
	// prepare loads the stock the generators sell: the same run flags.
	var common []string
	for i := 1; i < len(gen.args); i++ {
		takesValue, ok := shardOnly[gen.args[i]]
		if !ok {
			common = append(common, gen.args[i])
			continue
		}
		if takesValue {
			i++
		}
	}
	if !slices.Equal(common, prep.args[1:]) {
		t.Errorf("prepare's flags %v are not the generators' %v", prep.args[1:], common)
	}
	// Merge reads what the N generators wrote, each once.
	var outs []string
	for index := range gen.completions {
		a := gen.expand(t, index)
		outs = append(outs, a[slices.Index(a, "--out")+1])
	}
	if got := merge.args[2:]; !slices.Equal(got, outs) {
		t.Errorf("merge reads %v, the generators write %v", got, outs)
	}
	if want := filepath.Join(merge.args[1], "acks.json"); aud.args[slices.Index(aud.args, "--acks")+1] != want {
		t.Errorf("audit reads %v, merge writes %s", aud.args, want)
	}
}

// parseK8sCommand parses args (the command first) with the command's own
// flag set and runs its checks, as Main would before touching a server.
func parseK8sCommand(args []string, c k8sContainer) error {
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	switch args[0] {
	case "run", "prepare":
		var f runFlags
		f.register(fs)
		if args[0] == "run" {
			f.sh.register(fs)
		}
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if fs.NArg() > 0 {
			return fmt.Errorf("unexpected argument %q", fs.Arg(0))
		}
		o, err := f.resolve(fs)
		if err != nil {
			return err
		}
		if f.servers.Backend != "external" || len(o.Scenarios) != 1 {
			return fmt.Errorf("backend %q, scenarios %v: want external servers and one scenario", f.servers.Backend, o.Scenarios)
		}
		if args[0] == "run" {
			if f.sh.of != c.completions || c.parallelism != c.completions || !f.sh.noReset || f.sh.startBarrier == "" {
				return fmt.Errorf("--shard %s of a Job of %d completions, %d at once, --no-reset %v, barrier %q: want I/N of N pods running at once on prepared stores",
					f.sh.shard, c.completions, c.parallelism, f.sh.noReset, f.sh.startBarrier)
			}
		}
	case "merge":
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if fs.NArg() < 2 {
			return fmt.Errorf("usage: stockbench merge OUT DIR…")
		}
	case "audit":
		var a auditFlags
		a.register(fs)
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if fs.NArg() > 0 {
			return fmt.Errorf("unexpected argument %q", fs.Arg(0))
		}
		if a.acksFile == "" {
			return fmt.Errorf("no --acks: the audit would not check what clients were told")
		}
	default:
		return fmt.Errorf("no such command")
	}
	return nil
}
