package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stockbench/stockbench/service"
)

// block is one fenced block of a markdown file.
type block struct {
	lang, text string
	line       int
}

// fencedBlocks returns md's fenced blocks in order.
func fencedBlocks(md string) []block {
	var out []block
	var cur *block
	var buf strings.Builder
	for i, l := range strings.Split(md, "\n") {
		if strings.HasPrefix(l, "```") {
			if cur == nil {
				cur = &block{lang: strings.TrimPrefix(l, "```"), line: i + 1}
				buf.Reset()
				continue
			}
			cur.text = strings.TrimSuffix(buf.String(), "\n")
			out = append(out, *cur)
			cur = nil
			continue
		}
		if cur != nil {
			buf.WriteString(l + "\n")
		}
	}
	return out
}

// shellWords splits a command line as sh would for the quoting the
// examples use: single and double quotes, spaces.
func shellWords(s string) ([]string, error) {
	var out []string
	var w strings.Builder
	in, quote := false, rune(0)
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			w.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				out = append(out, w.String())
				w.Reset()
				in = false
			}
		default:
			w.WriteRune(r)
			in = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unclosed quote in %q", s)
	}
	if in {
		out = append(out, w.String())
	}
	return out, nil
}

// curlCall is what a curl example asks for.
type curlCall struct {
	method, url, body string
}

// parseCurl reads the curl flags the examples use: -s, -w FORMAT (the
// status after the body), -X METHOD, -d BODY, -H HEADER and the URL.
func parseCurl(words []string) (curlCall, error) {
	c := curlCall{method: http.MethodGet}
	if len(words) == 0 || words[0] != "curl" {
		return c, fmt.Errorf("not a curl command: %q", words)
	}
	for i := 1; i < len(words); i++ {
		switch w := words[i]; w {
		case "-s":
		case "-w", "-H":
			i++
		case "-X":
			i++
			c.method = words[i]
		case "-d":
			i++
			c.body = words[i]
			if c.method == http.MethodGet {
				c.method = http.MethodPost
			}
		default:
			if strings.HasPrefix(w, "-") {
				return c, fmt.Errorf("curl flag %s: not one the examples may use", w)
			}
			c.url = w
		}
	}
	if c.url == "" {
		return c, fmt.Errorf("curl without a URL: %q", words)
	}
	return c, nil
}

// TestDocsExamples runs docs/api.md's examples in order against an
// instance served as its serve command says (strategy and --load), with
// net/http: every curl block is sent, and the body's outcome, error,
// status and strategy, and the HTTP status, must be what the text block
// after it shows.
func TestDocsExamples(t *testing.T) {
	b, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := fencedBlocks(string(b))
	var strategy string
	stock := map[string]int64{}
	for _, bl := range blocks {
		if bl.lang != "sh" || !strings.HasPrefix(bl.text, "stockbench serve") {
			continue
		}
		words, err := shellWords(bl.text)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(words); i++ {
			switch words[i] {
			case "--strategy":
				strategy = words[i+1]
			case "--load":
				for _, kv := range strings.Split(words[i+1], ",") {
					k, v, _ := strings.Cut(kv, "=")
					n, err := strconv.ParseInt(v, 10, 64)
					if err != nil {
						t.Fatalf("--load %s: %v", words[i+1], err)
					}
					stock[k] = n
				}
			}
		}
		break
	}
	if strategy == "" || len(stock) == 0 {
		t.Fatal("docs/api.md: no `stockbench serve --strategy … --load …` block")
	}
	s := serve(t, strategy, stock, service.HandlerOptions{OpTimeout: 10 * time.Second})
	ran := 0
	for i, bl := range blocks {
		if bl.lang != "sh" || !strings.HasPrefix(bl.text, "curl ") {
			continue
		}
		if i+1 >= len(blocks) || blocks[i+1].lang != "text" {
			t.Fatalf("docs/api.md:%d: a curl example without the text block of what it prints", bl.line)
		}
		words, err := shellWords(bl.text)
		if err != nil {
			t.Fatalf("docs/api.md:%d: %v", bl.line, err)
		}
		call, err := parseCurl(words)
		if err != nil {
			t.Fatalf("docs/api.md:%d: %v", bl.line, err)
		}
		url := strings.Replace(call.url, "http://127.0.0.1:8080", s.in.URL(), 1)
		if url == call.url {
			t.Fatalf("docs/api.md:%d: the examples call http://127.0.0.1:8080, not %s", bl.line, call.url)
		}
		var body io.Reader
		if call.body != "" {
			body = strings.NewReader(call.body)
		}
		req, err := http.NewRequestWithContext(context.Background(), call.method, url, body)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("docs/api.md:%d: %v", bl.line, err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		lines := strings.Split(blocks[i+1].text, "\n")
		wantBody, wantStatus := strings.Join(lines[:len(lines)-1], "\n"), lines[len(lines)-1]
		if strconv.Itoa(resp.StatusCode) != wantStatus {
			t.Errorf("docs/api.md:%d: status %d, the docs show %s (body %s)", bl.line, resp.StatusCode, wantStatus, bytes.TrimSpace(got))
		}
		var w, g map[string]any
		if err := json.Unmarshal([]byte(wantBody), &w); err != nil {
			t.Fatalf("docs/api.md:%d: the shown body is not JSON: %v", blocks[i+1].line, err)
		}
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("docs/api.md:%d: the answer is not JSON: %v: %s", bl.line, err, got)
		}
		for _, k := range []string{"outcome", "error", "status", "strategy"} {
			if fmt.Sprint(w[k]) != fmt.Sprint(g[k]) {
				t.Errorf("docs/api.md:%d: %s is %v, the docs show %v", bl.line, k, g[k], w[k])
			}
		}
		ran++
	}
	if ran < 10 {
		t.Errorf("ran %d examples of docs/api.md; it has at least 10", ran)
	}
	t.Logf("ran %d examples of docs/api.md against %s", ran, strategy)
}
