package mcptool

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// maxNameLen is the longest tool name models accept (OpenAI's
// ^[a-zA-Z0-9_-]{1,64}$).
const maxNameLen = 64

// toolName is the name valet gives a server's tool: the server's Name, an
// underscore and the tool's name with every character outside
// [a-zA-Z0-9_-] replaced by '_'. A name longer than 64 characters keeps
// its first 55 and ends with '_' and 8 hex digits of a hash of the
// server's and tool's names, so long names that share a beginning stay
// apart.
func toolName(server, remote string) (string, error) {
	if remote == "" {
		return "", fmt.Errorf("%w: a tool without a name", ErrRefused)
	}
	var b strings.Builder
	b.Grow(len(server) + 1 + len(remote))
	b.WriteString(server)
	b.WriteByte('_')
	for _, r := range remote {
		if r < 0x80 && nameChar(byte(r)) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	name := b.String()
	if len(name) <= maxNameLen {
		return name, nil
	}
	h := sha256.Sum256([]byte(server + "\x00" + remote))
	return name[:maxNameLen-9] + "_" + hex.EncodeToString(h[:4]), nil
}

func nameChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}
