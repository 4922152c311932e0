package context

import (
	"strconv"
	"unicode/utf8"

	"github.com/valetkit/valet/llm"
)

// TruncateToolResult cuts a tool result that is longer than
// [Manager.ToolResultLimit] bytes, by the rule of [Manager.TruncateTo]. Call
// it on every tool result as it arrives, before it enters the history: it is
// the first of the three overflow defences. It returns the text to keep and
// whether it was cut.
func (m *Manager) TruncateToolResult(content string) (string, bool) {
	return m.TruncateTo(content, m.resultLimit)
}

// TruncateTo cuts content to at most maxChars bytes and appends a marker
// telling the reader how much was shown, e.g.
//
//	"\n…[truncated: showed 12,000 of 98,765 characters]"
//
// (the marker counts characters, that is runes, so it reads right for any
// script). Content of at most maxChars bytes is returned unchanged with
// false.
//
// The cut falls just before the last newline that lies within the final 20%
// before the limit, so a line-oriented result (logs, CSV, listings) loses no
// half line; when there is no such newline it falls at the limit, moved back
// to the start of a rune so a multi-byte UTF-8 character is never split (a
// "\r" before the newline goes too). The marker is added on top of the
// limit, so the result may exceed maxChars by the marker's length (under 60
// bytes). A maxChars <= 0 keeps nothing but the marker.
func (m *Manager) TruncateTo(content string, maxChars int) (string, bool) {
	return truncateTo(content, maxChars)
}

func truncateTo(content string, maxChars int) (string, bool) {
	if len(content) <= maxChars {
		return content, false
	}
	if maxChars < 0 {
		maxChars = 0
	}
	cut := cutPoint(content, maxChars)
	kept := content[:cut]
	shown := utf8.RuneCountInString(kept)
	total := shown + utf8.RuneCountInString(content[cut:])

	buf := make([]byte, 0, len(kept)+64)
	buf = append(buf, kept...)
	if len(kept) > 0 {
		buf = append(buf, '\n')
	}
	buf = append(buf, "…[truncated: showed "...)
	buf = appendThousands(buf, shown)
	buf = append(buf, " of "...)
	buf = appendThousands(buf, total)
	buf = append(buf, " characters]"...)
	return string(buf), true
}

// cutPoint returns where to cut s (len(s) > limit >= 0): the index of the
// last '\n' in s[limit-limit/5 : limit+1], else limit moved back to a rune
// start. A '\r' just before the cut is dropped as well.
func cutPoint(s string, limit int) int {
	lo := limit - limit/5
	cut := -1
	for i := limit; i >= lo && i > 0; i-- { // s[limit] exists because len(s) > limit
		if s[i] == '\n' {
			cut = i
			break
		}
	}
	if cut < 0 {
		cut = limit
		// Step back over at most UTFMax-1 continuation bytes; on invalid
		// UTF-8 with longer runs of them, cutting at the limit is as good
		// as anything.
		for back := 0; cut > 0 && back < utf8.UTFMax-1 && !utf8.RuneStart(s[cut]); back++ {
			cut--
		}
		if !utf8.RuneStart(s[cut]) {
			cut = limit
		}
	}
	if cut > 0 && s[cut-1] == '\r' {
		cut--
	}
	return cut
}

// appendThousands appends n with commas between groups of three digits.
func appendThousands(buf []byte, n int) []byte {
	digits := strconv.Itoa(n)
	if n < 0 {
		buf = append(buf, '-')
		digits = digits[1:]
	}
	for i := 0; i < len(digits); i++ {
		if i > 0 && (len(digits)-i)%3 == 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, digits[i])
	}
	return buf
}

// TruncateToolResults is the second overflow defence: after the model
// rejected a request as too long (llm.KindContextOverflow) even though the
// history was trimmed, it cuts the content of every tool message to maxChars
// bytes by the rule of [Manager.TruncateTo]. A maxChars <= 0 means a tenth of
// [Manager.ToolResultLimit]. Other messages are kept as they are; the result
// is a new slice and msgs is not modified. Pairing is unaffected: no message
// is added or removed.
func (m *Manager) TruncateToolResults(msgs []llm.Message, maxChars int) []llm.Message {
	if maxChars <= 0 {
		maxChars = m.resultLimit / 10
	}
	out := make([]llm.Message, len(msgs))
	copy(out, msgs)
	for i := range out {
		if out[i].Role == llm.RoleTool {
			out[i].Content, _ = truncateTo(out[i].Content, maxChars)
		}
	}
	return out
}
