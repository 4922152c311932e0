package delegate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/valetkit/valet/budget"
)

// Sentinel errors, to be tested with errors.Is.
var (
	// ErrNotFound: no result or graph of that id for that tenant. Another
	// tenant's is not found either.
	ErrNotFound = errors.New("delegate: not found")
	// ErrInvalid wraps the error of a graph, a task or a result that is
	// refused: its text says what.
	ErrInvalid = errors.New("delegate: invalid")
	// ErrCycle is the error of a graph whose depends_on edges make a
	// cycle; it wraps ErrInvalid, and the error returned names a task on
	// the cycle.
	ErrCycle = fmt.Errorf("%w: cycle in depends_on", ErrInvalid)
	// ErrExists: a result or a graph of that id is already stored for
	// the tenant.
	ErrExists = errors.New("delegate: already exists")
	// ErrRunning is returned by an engine's Run while another Run of the
	// same engine value is working: one Run at a time per engine.
	ErrRunning = errors.New("delegate: engine already running")
)

// CancelledError is the Error of a task that Canceller.Cancel stopped.
const CancelledError = "cancelled: the conversation's background work was stopped"

// ResultStatus says how a sub-agent's run ended.
type ResultStatus string

// The statuses of a Result.
const (
	// ResultCompleted: the sub-agent finished its task.
	ResultCompleted ResultStatus = "completed"
	// ResultPartial: a budget or a timeout stopped it; Text is what it
	// had so far.
	ResultPartial ResultStatus = "partial"
	// ResultFailed: it ran and failed; Text says what it reported.
	ResultFailed ResultStatus = "failed"
)

// Valid reports whether s is one of the statuses above.
func (s ResultStatus) Valid() bool {
	return s == ResultCompleted || s == ResultPartial || s == ResultFailed
}

// Result is a sub-agent's output, stored before anyone is told of it, so
// that it is not lost between the sub-agent finishing and its reader.
type Result struct {
	// ID names the result in its tenant: 1 to MaxIDLen characters of
	// [A-Za-z0-9._-]. A reference [agent_result:ID] in a spawn's context
	// points at it (see Refs). A graph's task's result has
	// ResultID(graphID, taskID).
	ID string
	// TenantID is the tenant the result belongs to; another tenant does
	// not find it.
	TenantID string
	// ConversationID is the coordinator's conversation.
	ConversationID string
	// GraphID and TaskID are set for the result of a graph's task.
	GraphID, TaskID string
	// Skill is the skill the sub-agent ran with; "" for none.
	Skill string
	// Text is the sub-agent's final message. It is untrusted text: the
	// sub-agent read tool output and other sources. Frame it as data
	// wherever it is shown to a model or a user.
	Text string
	// Status is how the sub-agent's run ended.
	Status ResultStatus
	// Usage is what the sub-agent consumed.
	Usage budget.Consumed
	// CreatedAt is when the result was stored (the engine's clock).
	CreatedAt time.Time
}

// Results keeps sub-agents' results.
type Results interface {
	// PutResult stores r. It returns ErrExists when the tenant has a
	// result of that id, and an error wrapping ErrInvalid for a result
	// Result.Check refuses. A zero CreatedAt is set to the store's clock.
	PutResult(ctx context.Context, r Result) error
	// Result returns the tenant's result of that id, or ErrNotFound
	// (also for another tenant's result).
	Result(ctx context.Context, tenantID, id string) (Result, error)
}

// TaskSpec is one task of a graph, as the coordinator asks for it.
type TaskSpec struct {
	// ID names the task in its graph: 1 to MaxIDLen characters of
	// [a-z0-9_-], unique in the graph.
	ID string
	// Skill is the skill the task runs with; "" for the executor's
	// default worker.
	Skill string
	// Task is what the sub-agent is asked to do. Required.
	Task string
	// Context is text given to the sub-agent with its task. A reference
	// [agent_result:ID] in it naming a task of the graph must name one
	// the task depends on.
	Context string
	// DependsOn lists the ids of the tasks whose results this one needs:
	// it starts once they all completed.
	DependsOn []string
}

// TaskStatus is where a task of a graph is.
type TaskStatus string

// The statuses of a Task.
const (
	// TaskPending: waiting for its dependencies (or for a worker).
	TaskPending TaskStatus = "pending"
	// TaskRunning: its executor is running it.
	TaskRunning TaskStatus = "running"
	// TaskCompleted: it ran and its result is stored (completed or
	// partial).
	TaskCompleted TaskStatus = "completed"
	// TaskFailed: it ran and failed, or its runs failed every attempt,
	// or the graph's budget was spent before it could start.
	TaskFailed TaskStatus = "failed"
	// TaskBlocked: a task it depends on (directly or not) failed; it
	// never runs.
	TaskBlocked TaskStatus = "blocked"
	// TaskCancelled: Canceller.Cancel stopped its graph before it ended:
	// it never runs (again), and a run of it under way had its ctx
	// cancelled and its output dropped.
	TaskCancelled TaskStatus = "cancelled"
)

// Ended reports whether s is a final status.
func (s TaskStatus) Ended() bool {
	return s == TaskCompleted || s == TaskFailed || s == TaskBlocked || s == TaskCancelled
}

// Task is a task of a stored graph.
type Task struct {
	TaskSpec
	// Status is where the task is.
	Status TaskStatus
	// ResultID is the id of its stored result, once it ran.
	ResultID string
	// Error says why a failed or blocked task is so: the failure, or the
	// id of the failed task that blocked it. It is one line.
	Error string
	// Attempts counts the runs of the task that returned an error.
	Attempts int
	// StartedAt and EndedAt are when its (last) run started and when it
	// ended (the engine's clock).
	StartedAt, EndedAt time.Time
}

// GraphStatus is where a graph is.
type GraphStatus string

// The statuses of a Graph.
const (
	// GraphRunning: some task can still run.
	GraphRunning GraphStatus = "running"
	// GraphCompleted: every task completed.
	GraphCompleted GraphStatus = "completed"
	// GraphFailed: nothing more can run and some task failed or was
	// blocked.
	GraphFailed GraphStatus = "failed"
	// GraphCancelled: Canceller.Cancel stopped it while it ran; its end
	// is not delivered.
	GraphCancelled GraphStatus = "cancelled"
)

// Graph is a set of tasks with depends_on edges, run in the background
// for a coordinator's conversation. When it ends, the engine tells the
// conversation (Executor.Deliver).
type Graph struct {
	// ID names the graph in its tenant (see NewID).
	ID string
	// TenantID and ConversationID are the coordinator's.
	TenantID, ConversationID string
	// Model is the coordinator's model name, for the executor.
	Model string
	// Budget is for the whole graph, given at spawn: the engine starts
	// no task once Consumed reached one of its caps (that task fails, its
	// dependants are blocked), and the executor gives a task at most what
	// is left. MaxWall counts from CreatedAt. A graph with a spending cap
	// (OneAtATime) runs one task at a time, each on what the ones before
	// it left, so it spends at most its budget and the one model call
	// that crossed it — tasks run side by side would each start with the
	// whole remainder.
	Budget budget.Limits
	// Tasks are the graph's tasks, in the order given.
	Tasks []Task
	// Status is where the graph is.
	Status GraphStatus
	// Consumed is what the graph's tasks consumed so far.
	Consumed budget.Consumed
	// Delivered is set once Executor.Deliver returned nil for the ended
	// graph. A cancelled graph is never delivered.
	Delivered bool
	// CreatedAt is when it was submitted, EndedAt when its last task
	// ended (the engine's clock).
	CreatedAt, EndedAt time.Time
}

// Task returns the graph's task of that id, or nil.
func (g *Graph) Task(id string) *Task {
	for i := range g.Tasks {
		if g.Tasks[i].ID == id {
			return &g.Tasks[i]
		}
	}
	return nil
}

// Clone returns a copy of g sharing no slice with it.
func (g Graph) Clone() Graph {
	tasks := make([]Task, len(g.Tasks))
	for i, t := range g.Tasks {
		t.DependsOn = append([]string(nil), t.DependsOn...)
		tasks[i] = t
	}
	g.Tasks = tasks
	return g
}

// Output is what an executor's run of a task gave.
type Output struct {
	// Text is the sub-agent's final message (untrusted text).
	Text string
	// Status is how its run ended; "" means ResultCompleted.
	Status ResultStatus
	// Usage is what it consumed.
	Usage budget.Consumed
}

// Executor runs a graph's tasks and tells the coordinator's conversation
// of a graph's end. agent.Orchestrator.TaskExecutor returns one.
type Executor interface {
	// RunTask runs task t of graph g, whose dependencies completed; deps
	// are their results by task id. g and t are copies: changing them
	// changes nothing. g.Tasks holds at least t (a durable engine does
	// not load every task of the graph for each run); g.Budget and
	// g.Consumed say what the graph has left. An error is a failure of the run itself: a
	// durable engine may run the task again. A sub-agent that ran and
	// failed returns Output{Status: ResultFailed}, with no error. The
	// engines recover a panic of RunTask or Deliver and take it for an
	// error.
	RunTask(ctx context.Context, g *Graph, t *Task, deps map[string]Result) (Output, error)
	// Deliver tells g's conversation that g ended (it becomes a new
	// message there). It is called at least once per ended graph, again
	// after an error (with a growing delay) until it returns nil, also
	// after a restart: make it idempotent by g.ID.
	Deliver(ctx context.Context, g *Graph) error
}

// Engine keeps results and runs graphs. Its implementations are the
// in-memory Memory and pgdelegate's PostgreSQL engine; delegatetest
// checks both behave alike.
type Engine interface {
	Results
	// Submit checks g (Graph.Check) and stores it, its tasks pending and
	// its status running; it returns ErrExists when the tenant has a
	// graph of that id, and stores nothing when it returns an error. Its
	// ready tasks start once Run runs.
	Submit(ctx context.Context, g Graph) error
	// Graph returns the tenant's graph of that id, or ErrNotFound (also
	// for another tenant's graph).
	Graph(ctx context.Context, tenantID, id string) (Graph, error)
	// Forget drops the tenant's results and graphs of a conversation
	// (the user asked for it to go): they are not found any more, their
	// tasks not yet started do not start, a task under way has its output
	// dropped, and their ends are not delivered. A graph whose delivery
	// is under way when Forget runs may still be delivered once (the
	// executor looks the graph up first: see agent.Orchestrator.Forget).
	Forget(ctx context.Context, tenantID, conversationID string) error
	// Run works tasks and deliveries until ctx ends, then returns nil
	// once what it started has returned. It first delivers the ended
	// graphs not yet delivered.
	Run(ctx context.Context, exec Executor) error
}

// Canceller is an Engine that can stop a conversation's background work
// (agent.Orchestrator.Cancel uses it when its engine is one). Memory and
// pgdelegate's Engine are; delegatetest checks it.
type Canceller interface {
	// Cancel ends the tenant's running graphs of the conversation as
	// GraphCancelled and returns how many it ended: their tasks not yet
	// ended become TaskCancelled (Error CancelledError) at once, a run of
	// one under way has its ctx cancelled, in whichever process runs it,
	// and its output is dropped (no result is stored for it), none of
	// them starts or runs again — after a retry, a restart or on another
	// replica either — and the graphs' ends are not delivered. Graphs
	// that ended before it are left as they are (their delivery goes
	// ahead), as are the conversation's graphs submitted after it.
	Cancel(ctx context.Context, tenantID, conversationID string) (int, error)
}
