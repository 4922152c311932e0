package readmecheck

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// prelude declares what the README's snippets use without declaring it,
// and uses every import once so that a snippet needs only some of them.
const prelude = `package main

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/agenthttp"
	"github.com/valetkit/valet/agent/transcript"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/clock/clocktest"
	"github.com/valetkit/valet/credentials"
	"github.com/valetkit/valet/credentials/pgstore"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/llm/openai"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/memory/pgmemory"
	"github.com/valetkit/valet/pool"
	"github.com/valetkit/valet/pool/redispool"
	"github.com/valetkit/valet/sqlitedb"
	"github.com/valetkit/valet/tool"
	"github.com/valetkit/valet/tool/mcptool"
	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/agentexec"
	"github.com/valetkit/valet/trigger/redisbus"
	"github.com/valetkit/valet/trigger/rivertrigger"
	"github.com/valetkit/valet/trigger/triggertest"
)

var (
	ctx          context.Context
	client       llm.Client
	db           *pgxpool.Pool
	pg           *pgxpool.Pool // the PostgreSQL a deployment moves to
	stores       *sqlitedb.Stores
	rdb          redis.UniversalClient
	ring         *credentials.KeyRing
	orchestrator *agent.Orchestrator
	chat         trigger.Notifier
	executors    map[string]trigger.Executor
	data         map[string]any
	lookUpWeather func(ctx context.Context, city string, days int) (string, error)
	t             *testing.T
	spanExporter   sdktrace.SpanExporter // an OTLP exporter in the README's text
	metricExporter sdkmetric.Exporter
)

var (
	_ = fmt.Sprint
	_ = log.Print
	_ = http.NewServeMux
	_ = agenthttp.New
	_ = approval.Approve
	_ = credentials.NewMemory
	_ = llmtest.NewScript
	_ = openai.New
	_ = memory.EstimateTokens
	_ = pgmemory.New
	_ = pgstore.New
	_ = pool.NewMemory
	_ = redispool.New
	_ = tool.New[struct{}, string]
	_ = mcptool.Connect
	_ = transcript.New
	_ = agentexec.New
	_ = redisbus.New
	_ = rivertrigger.New
	_ = triggertest.WaitIdle
	_ = clocktest.New
	_ = time.Now
	_ = sql.Open
	_ = sdktrace.NewTracerProvider
	_ = sdkmetric.NewMeterProvider
)

func main() {}
`

// goBlocks returns the Go code blocks of markdown text, in order.
func goBlocks(md string) []string {
	var blocks []string
	var cur *strings.Builder
	for line := range strings.Lines(md) {
		switch {
		case cur == nil && strings.TrimSpace(line) == "```go":
			cur = &strings.Builder{}
		case cur != nil && strings.TrimSpace(line) == "```":
			blocks = append(blocks, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line)
		}
	}
	return blocks
}

// notUsed matches the compiler's complaint about a local variable a
// snippet declares and leaves unused.
var notUsed = regexp.MustCompile(`declared and not used`)

// Every Go snippet of README.md compiles against the module as it is.
func TestREADMESnippetsCompile(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command on PATH")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := goBlocks(string(md))
	if len(blocks) == 0 {
		t.Fatal("README.md has no Go snippets; the test reads the wrong file")
	}
	var src strings.Builder
	src.WriteString(prelude)
	lineOf := make([]int, 0, len(blocks)) // first line of each snippet's function in src
	for i, b := range blocks {
		lineOf = append(lineOf, strings.Count(src.String(), "\n")+2)
		fmt.Fprintf(&src, "\nfunc snippet%d() {\n%s}\n", i+1, b)
	}
	// The program exists only in an overlay, so the test writes nothing
	// into the source tree, yet builds as a package of the module.
	dir := t.TempDir()
	gen := filepath.Join(dir, "main.go")
	if err := os.WriteFile(gen, []byte(src.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	virtual := filepath.Join(root, "internal", "readmecheck", "snippets", "main.go")
	overlay, _ := json.Marshal(map[string]map[string]string{"Replace": {virtual: gen}})
	ov := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(ov, overlay, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-overlay", ov, "-gcflags=-e", "-o", os.DevNull, "./internal/readmecheck/snippets")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err == nil {
		return
	}
	var problems []string
	for line := range strings.Lines(string(out)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || notUsed.MatchString(line) {
			continue
		}
		problems = append(problems, line+snippetOf(line, lineOf))
	}
	if len(problems) > 0 {
		t.Fatalf("README.md snippets do not compile:\n%s", strings.Join(problems, "\n"))
	}
}

// snippetOf names the snippet a compiler message's line falls in.
func snippetOf(msg string, lineOf []int) string {
	m := regexp.MustCompile(`main\.go:(\d+):`).FindStringSubmatch(msg)
	if m == nil {
		return ""
	}
	var n int
	fmt.Sscan(m[1], &n)
	for i := len(lineOf) - 1; i >= 0; i-- {
		if n >= lineOf[i] {
			return fmt.Sprintf(" (snippet %d, line %d of it)", i+1, n-lineOf[i])
		}
	}
	return ""
}
