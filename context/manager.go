package context

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/valetkit/valet/llm"
)

// Defaults taken by the zero fields of [Config]. They match the defaults of
// agent.LoopConfig.
const (
	DefaultTokenLimit         = 128000
	DefaultTrimThreshold      = 0.8
	DefaultMaxHistoryMessages = 40
	DefaultMaxToolResultShare = 0.3
	DefaultMaxToolResultChars = 400000
	DefaultForceTrimKeep      = 5
	DefaultCharsPerToken      = 4.0
)

// Fixed per-message costs added by [Manager.MessageTokens] to the tokens of
// the text a message carries. Chat APIs wrap every message (its role,
// separators) and every tool call (its type and structure) in a few tokens of
// framing that no text accounts for; these constants are a small, slightly
// generous estimate of that framing.
const (
	MessageOverheadTokens  = 4 // per message
	ToolCallOverheadTokens = 3 // per tool call of an assistant message
)

// ErrInvalidConfig is returned (wrapped with the details) by [NewManager]
// when a [Config] field holds a value out of range.
var ErrInvalidConfig = errors.New("context: invalid config")

// Config sets the limits of a [Manager]. A zero field takes the default
// named beside it; negative values, NaN, and a TrimThreshold or
// MaxToolResultShare above 1 are rejected by [NewManager].
//
// "Chars" are bytes of UTF-8 text, as Go's len counts them (one byte per
// character for ASCII). Measuring in bytes keeps the limits consistent with
// the token estimate, which is also computed from byte lengths.
type Config struct {
	// TokenLimit is the model's context window in tokens.
	// Default DefaultTokenLimit (128000).
	TokenLimit int
	// TrimThreshold is the share of TokenLimit above which the history is
	// trimmed, in (0, 1]. Default DefaultTrimThreshold (0.8).
	TrimThreshold float64
	// MaxHistoryMessages is the number of non-system messages (messages
	// after the leading system messages) that Trim keeps at most.
	// Default DefaultMaxHistoryMessages (40).
	MaxHistoryMessages int
	// MaxToolResultShare is the share of TokenLimit one tool result may use,
	// in (0, 1]. Default DefaultMaxToolResultShare (0.3).
	MaxToolResultShare float64
	// MaxToolResultChars caps one tool result in bytes whatever the share
	// allows. Default DefaultMaxToolResultChars (400000).
	MaxToolResultChars int
	// ForceTrimKeep is the number of non-system messages ForceTrim keeps.
	// Default DefaultForceTrimKeep (5).
	ForceTrimKeep int
	// CharsPerToken is the bytes-per-token ratio of the built-in estimate,
	// used when CountTokens is nil. Default DefaultCharsPerToken (4).
	CharsPerToken float64
	// CountTokens, when set, is a real tokenizer used instead of the
	// estimate. It must be safe for concurrent use and should not allocate
	// if NeedsTrim is to stay allocation-free. Default nil: the estimate
	// ceil(len(text) / CharsPerToken).
	CountTokens func(text string) int
}

// Manager applies a [Config] to conversations: it estimates tokens, truncates
// tool results, and trims histories while keeping tool-call pairing. A
// Manager is immutable and safe for concurrent use.
type Manager struct {
	cfg Config
	// budget is floor(TrimThreshold * TokenLimit): the most tokens a
	// history may hold without needing a trim.
	budget int
	// resultLimit is the most bytes one tool result may keep.
	resultLimit int
}

// NewManager checks cfg, fills in its defaults, and returns a Manager. An
// out-of-range field gives an error wrapping [ErrInvalidConfig] that names
// every offending field.
func NewManager(cfg Config) (*Manager, error) {
	var problems []string
	nonNegInt := func(name string, v int) {
		if v < 0 {
			problems = append(problems, fmt.Sprintf("%s is %d, must be >= 0", name, v))
		}
	}
	share := func(name string, v float64) {
		if math.IsNaN(v) || v < 0 || v > 1 {
			problems = append(problems, fmt.Sprintf("%s is %v, must be in [0, 1]", name, v))
		}
	}
	nonNegInt("TokenLimit", cfg.TokenLimit)
	share("TrimThreshold", cfg.TrimThreshold)
	nonNegInt("MaxHistoryMessages", cfg.MaxHistoryMessages)
	share("MaxToolResultShare", cfg.MaxToolResultShare)
	nonNegInt("MaxToolResultChars", cfg.MaxToolResultChars)
	nonNegInt("ForceTrimKeep", cfg.ForceTrimKeep)
	if math.IsNaN(cfg.CharsPerToken) || math.IsInf(cfg.CharsPerToken, 0) || cfg.CharsPerToken < 0 {
		problems = append(problems, fmt.Sprintf("CharsPerToken is %v, must be a finite number >= 0", cfg.CharsPerToken))
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrInvalidConfig, strings.Join(problems, "; "))
	}

	if cfg.TokenLimit == 0 {
		cfg.TokenLimit = DefaultTokenLimit
	}
	if cfg.TrimThreshold == 0 {
		cfg.TrimThreshold = DefaultTrimThreshold
	}
	if cfg.MaxHistoryMessages == 0 {
		cfg.MaxHistoryMessages = DefaultMaxHistoryMessages
	}
	if cfg.MaxToolResultShare == 0 {
		cfg.MaxToolResultShare = DefaultMaxToolResultShare
	}
	if cfg.MaxToolResultChars == 0 {
		cfg.MaxToolResultChars = DefaultMaxToolResultChars
	}
	if cfg.ForceTrimKeep == 0 {
		cfg.ForceTrimKeep = DefaultForceTrimKeep
	}
	if cfg.CharsPerToken == 0 {
		cfg.CharsPerToken = DefaultCharsPerToken
	}

	m := &Manager{cfg: cfg}
	m.budget = int(math.Floor(cfg.TrimThreshold * float64(cfg.TokenLimit)))
	cpt := cfg.CharsPerToken
	if cfg.CountTokens != nil {
		cpt = DefaultCharsPerToken
	}
	byShare := cfg.MaxToolResultShare * float64(cfg.TokenLimit) * cpt
	m.resultLimit = cfg.MaxToolResultChars
	if byShare < float64(m.resultLimit) {
		m.resultLimit = int(byShare)
	}
	return m, nil
}

// Config returns the configuration in use, with defaults filled in.
func (m *Manager) Config() Config { return m.cfg }

// TrimBudget returns floor(TrimThreshold × TokenLimit): the most tokens a
// history may hold before [Manager.NeedsTrim] reports true, and the target
// [Manager.Trim] cuts down to.
func (m *Manager) TrimBudget() int { return m.budget }

// ToolResultLimit returns the most bytes [Manager.TruncateToolResult] lets
// one tool result keep: min(MaxToolResultChars, MaxToolResultShare ×
// TokenLimit × chars-per-token), where chars-per-token is CharsPerToken, or
// DefaultCharsPerToken when a CountTokens tokenizer is configured.
func (m *Manager) ToolResultLimit() int { return m.resultLimit }

// CountTokens returns the tokens of text: Config.CountTokens(text) when a
// tokenizer is configured, otherwise the estimate ceil(len(text) /
// CharsPerToken) — a quarter of the byte length by default, which is close
// for English prose and code and errs on the high side for most other text.
// The estimate does not allocate. The result is always in [0,
// MaxTokensPerText].
func (m *Manager) CountTokens(text string) int {
	if m.cfg.CountTokens != nil {
		return clampTokens(m.cfg.CountTokens(text))
	}
	return m.estimate(len(text))
}

// MaxTokensPerText is the most tokens one text counts for: larger counts,
// from a tokenizer or from a tiny CharsPerToken, are cut to it so that sums
// over a history cannot overflow. Negative counts from a tokenizer count as
// zero.
const MaxTokensPerText = 1 << 40

func clampTokens(n int) int { return min(max(n, 0), MaxTokensPerText) }

func (m *Manager) estimate(n int) int {
	if n <= 0 {
		return 0
	}
	t := math.Ceil(float64(n) / m.cfg.CharsPerToken)
	if !(t < MaxTokensPerText) { // also catches +Inf
		return MaxTokensPerText
	}
	return int(t)
}

func (m *Manager) count(text string) int {
	if text == "" {
		return 0
	}
	return m.CountTokens(text)
}

func (m *Manager) countBytes(b []byte) int {
	if m.cfg.CountTokens != nil {
		if len(b) == 0 {
			return 0
		}
		return clampTokens(m.cfg.CountTokens(string(b)))
	}
	return m.estimate(len(b))
}

// MessageTokens returns the tokens of one message as sent to the model:
//
//	MessageOverheadTokens
//	+ tokens(Content) + tokens(Name) + tokens(ToolCallID)
//	+ for each tool call: ToolCallOverheadTokens + tokens(ID) + tokens(Name) + tokens(Arguments)
//
// Empty parts cost nothing. With the built-in estimate it does not allocate;
// with a tokenizer, the arguments are converted to a string for it.
func (m *Manager) MessageTokens(msg llm.Message) int {
	n := MessageOverheadTokens + m.count(msg.Content) + m.count(msg.Name) + m.count(msg.ToolCallID)
	for i := range msg.ToolCalls {
		c := &msg.ToolCalls[i]
		n += ToolCallOverheadTokens + m.count(c.ID) + m.count(c.Name) + m.countBytes(c.Arguments)
	}
	return n
}

// Tokens returns the sum of [Manager.MessageTokens] over msgs. With the
// built-in estimate it does not allocate, so it is cheap enough to run on
// every turn.
func (m *Manager) Tokens(msgs []llm.Message) int {
	n := 0
	for i := range msgs {
		n += m.MessageTokens(msgs[i])
	}
	return n
}

// NeedsTrim reports whether msgs should go through [Manager.Trim] before
// the next model call: its tokens exceed TrimThreshold × TokenLimit, or it
// holds more than MaxHistoryMessages non-system messages (messages after
// the leading system messages). With the built-in estimate it does not
// allocate.
func (m *Manager) NeedsTrim(msgs []llm.Message) bool {
	if len(msgs)-leadingSystem(msgs) > m.cfg.MaxHistoryMessages {
		return true
	}
	n := 0
	for i := range msgs {
		if n += m.MessageTokens(msgs[i]); n > m.budget {
			return true // no need to count the rest
		}
	}
	return false
}

// leadingSystem returns the number of system messages at the start of msgs.
func leadingSystem(msgs []llm.Message) int {
	p := 0
	for p < len(msgs) && msgs[p].Role == llm.RoleSystem {
		p++
	}
	return p
}
