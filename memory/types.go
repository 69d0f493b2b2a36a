package memory

import (
	"encoding/json"
	"errors"
	"time"
)

// Sentinel errors for conditions callers are expected to handle. Every error returned by this package that
// stems from one of these wraps it, so errors.Is works.
var (
	ErrNotFound     = errors.New("not found")
	ErrExists       = errors.New("already exists")
	ErrHasForks     = errors.New("session has forks or continuations")
	ErrNewerSchema  = errors.New("database schema is newer than this build of visor")
	ErrNoFTS5       = errors.New("this build of visor has no FTS5, which the search index uses")
	ErrBadQuery     = errors.New("bad search query")
	ErrDiskFull     = errors.New("the disk holding the database is full")
	ErrInvalidInput = errors.New("invalid input")
	ErrReadOnly     = errors.New("the database cannot be written")
)

// inputError is a mistake in what the user gave, said in its own words ending with the fix, not followed by
// ": invalid input"; errors.Is(err, ErrInvalidInput) holds for it.
type inputError string

func (e inputError) Error() string        { return string(e) }
func (e inputError) Is(target error) bool { return target == ErrInvalidInput }

// Link kinds say how a session relates to its parent.
const (
	// LinkFork: the session continues from a point in the parent's history (Fork).
	LinkFork = "fork"
	// LinkContinuation: the session replaces the parent after context compaction (CreateLinkedSession).
	LinkContinuation = "continuation"
)

// Session is one conversation. A session with a ParentID reads part of its parent's history in place rather
// than copying it (see Messages).
type Session struct {
	ID            string
	Title         string
	Agent         string
	Model         string
	EngineProfile string

	// ParentID is empty for a root session. LinkKind is LinkFork or LinkContinuation when ParentID is set.
	ParentID string
	LinkKind string
	// InheritFrom and InheritTo bound, inclusively, the messages of the parent's history that this session
	// sees before its own. InheritFrom 0 means from the start; InheritTo 0 means nothing is inherited.
	// For a fork, InheritTo is the fork point.
	InheritFrom int64
	InheritTo   int64

	CreatedAt time.Time
	UpdatedAt time.Time

	// Token totals over this session's own messages (inherited messages count toward the parent).
	PromptTokens    int64
	CachedTokens    int64
	GeneratedTokens int64

	// Read-only, filled by reads: the number of own messages and whether a turn is open (in progress, or
	// left open by a process that died; see BeginTurn).
	MessageCount int
	OpenTurn     bool
}

// Message is one chat message as sent to or received from the model.
type Message struct {
	// ID and SessionID are assigned by the store and filled on read; ignored by AppendStep.
	ID        int64
	SessionID string

	Role         string
	Content      string
	Reasoning    string
	ToolCalls    []ToolCall
	ToolCallID   string
	ToolName     string
	FinishReason string
	// Images are kept in order. On write, Data is required unless SHA256 names a blob already stored;
	// MIME, Width and Height are filled from the bytes when they can be decoded.
	Images  []Image
	Timings *Timings
	// Interrupted marks a message cut short (user interrupt, crash), set by the writer or by MarkInterrupted.
	Interrupted bool
	// Rejected marks a message of a turn the engine refused for its content (MarkRejected); set on read only.
	// Such turns are kept for the record but never sent to the model again.
	Rejected bool
	// CreatedAt defaults to the time of the write. Stored with millisecond precision.
	CreatedAt time.Time

	prelude bool // a continuation's summary, placed before the inherited messages
}

// ToolCall is one call the model asked for. Arguments are stored byte for byte, even when they are not
// valid JSON (models do emit broken JSON, and the broken text is what needs debugging).
type ToolCall struct {
	ID        string
	Name      string
	Arguments json.RawMessage
}

// Image is an image attached to a message, stored once per distinct content (SHA256 of Data).
type Image struct {
	SHA256 string // lowercase hex
	MIME   string
	Width  int
	Height int
	Data   []byte
}

// Timings are the engine's measurements for the model call that produced a message.
// Durations are stored with microsecond precision.
type Timings struct {
	PromptTokens     int
	CachedTokens     int
	GeneratedTokens  int
	PromptPerSecond  float64
	TokensPerSecond  float64
	DraftTokens      int
	DraftAccepted    int
	TimeToFirstToken time.Duration
	Duration         time.Duration
}

// ToolRun is one execution of a tool. Result is kept whole; only the first MaxIndexedToolText bytes are
// searchable.
type ToolRun struct {
	ID        int64 // assigned by the store
	SessionID string
	// MessageID is the last message written in the same step (0 if the step had none); it places the run in
	// the history so forks see the runs of the messages they inherit.
	MessageID int64
	CallID    string
	Name      string
	Arguments json.RawMessage
	Result    string
	Error     string
	Duration  time.Duration
	StartedAt time.Time
}

// Step is what one model call produced plus the tool runs it caused; AppendStep writes it atomically.
type Step struct {
	Messages []Message
	ToolRuns []ToolRun
}

// EngineEventKind names what happened to the model server.
type EngineEventKind string

// Engine event kinds known today; others are stored as given.
const (
	EngineStart EngineEventKind = "start"
	EngineStop  EngineEventKind = "stop"
	EngineCrash EngineEventKind = "crash"
	EngineSwap  EngineEventKind = "swap"
	// EngineWarmup is a warm-up after a launch (the GPU's first image and long prompt), with its duration.
	EngineWarmup EngineEventKind = "warmup"
	// EnginePrefill is an ahead-of-time evaluation (attached images encoded before the question).
	EnginePrefill EngineEventKind = "prefill"
	// EnginePrefillFailed is a prefill that failed: the request after it evaluated the images itself.
	EnginePrefillFailed EngineEventKind = "prefill_failed"
	// EnginePrefillWait is how long a request waited for a prefill still running: the part of it not hidden.
	EnginePrefillWait EngineEventKind = "prefill_wait"
	// EngineDecision is one of the ahead-of-time scheduler's actions, with its reason.
	EngineDecision      EngineEventKind = "decision"
	EngineProfileChange EngineEventKind = "profile_change"
)

// EngineEvent is something the engine did, optionally tied to a session.
type EngineEvent struct {
	ID        int64
	SessionID string // optional
	Kind      EngineEventKind
	At        time.Time
	Duration  time.Duration
	Detail    json.RawMessage // optional JSON object, stored as given
}

// SessionFilter selects sessions for ListSessions. Zero fields do not filter.
type SessionFilter struct {
	Agent    string
	ParentID string
	Since    time.Time // updated at or after
	Limit    int       // 0 means 100
}

// Query is a full-text search. By default Text is split into terms that must all occur (each term is quoted,
// so punctuation is literal and never an FTS syntax error; a trailing * on a term makes it a prefix). With
// Raw, Text is passed to FTS5 as is (AND, OR, NOT, NEAR, column filters, "phrases").
type Query struct {
	Text      string
	Raw       bool
	SessionID string
	Agent     string
	Role      string
	Since     time.Time // inclusive
	Until     time.Time // exclusive
	Limit     int       // 0 means 20
}

// Hit is one search result. Exactly one of MessageID and ToolRunID is non-zero.
type Hit struct {
	SessionID    string
	SessionTitle string
	Agent        string
	MessageID    int64
	ToolRunID    int64
	Role         string
	// Snippet is up to 16 tokens around the match, matched terms in [brackets], cuts marked with ….
	Snippet string
	// Rank is bm25: lower is better.
	Rank      float64
	CreatedAt time.Time
}
