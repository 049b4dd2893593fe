package queues

import (
	"bytes"
)

// chunk is the text of one document and the line it starts on.
type chunk struct {
	text []byte
	line int
}

// splitDocuments splits a YAML stream at its document markers: lines that
// start with "---" or "..." followed by nothing, a blank or a comment. Text
// after "---" on the same line begins the next document. It returns at most
// limit+1 chunks, so the caller can tell there are more than limit.
func splitDocuments(data []byte, limit int) []chunk {
	var out []chunk
	start, startLine, line := 0, 1, 1
	for pos := 0; pos < len(data); line++ {
		next := len(data)
		if nl := bytes.IndexByte(data[pos:], '\n'); nl >= 0 {
			next = pos + nl + 1
		}
		if isMarker(data[pos:next]) {
			out = append(out, chunk{data[start:pos], startLine})
			if len(out) > limit {
				return out
			}
			start, startLine = pos+3, line
			if data[pos] == '.' {
				start, startLine = next, line+1
			}
		}
		pos = next
	}
	return append(out, chunk{data[start:], startLine})
}

func isMarker(line []byte) bool {
	if !bytes.HasPrefix(line, []byte("---")) && !bytes.HasPrefix(line, []byte("...")) {
		return false
	}
	rest := bytes.TrimRight(line[3:], "\r\n")
	if line[0] == '.' {
		rest = bytes.TrimLeft(rest, " \t")
		return len(rest) == 0 || rest[0] == '#'
	}
	return len(rest) == 0 || rest[0] == ' ' || rest[0] == '\t'
}
