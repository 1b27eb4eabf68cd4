package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
)

// A record is one JSON object to upload. Its body is never held by the
// uploader once read: body opens it afresh for every attempt, which is what
// Request.GetBody is for.
//
// In a file, a record is one line's content: the bytes before its
// terminator, "\n" or "\r\n" (the last line may have none). Those bytes go
// to the server exactly as they are, surrounding spaces included; any other
// "\r" is content. Lines that are empty or only spaces are skipped.
type record struct {
	id   string
	line int // 1-based line of the input, 0 when generated
	body func() (io.ReadCloser, error)
	size int64
	hash [sha256.Size]byte // of the body: the journal knows a record by its id and hash
}

// request builds the upload of r to target. GetBody makes it replayable, so
// the transport may retry it after a 429 without buffering it whole.
func (r record) request(method, target, apiKey string) (*http.Request, error) {
	body, err := r.body()
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequest(method, target, body)
	if err != nil {
		body.Close()
		return nil, err
	}
	req.GetBody = r.body
	req.ContentLength = r.size
	req.Header.Set("Content-Type", "application/json")
	// Escaped as in the URL, so that no id makes an invalid header; and
	// the record's content in it: a key is one payload's, and a record
	// edited since a run the server kept its key from is another request
	// (found in review: sent with the old key, the fixed record was
	// refused with 422 by a server keeping keys as the IETF draft says).
	req.Header.Set("Idempotency-Key", "record-"+url.PathEscape(r.id)+"-"+hex.EncodeToString(r.hash[:8]))
	if apiKey != "" {
		req.Header.Set("X-API-Key", apiKey)
	}
	return req, nil
}

// generate makes n small records.
func generate(n int) []record {
	recs := make([]record, n)
	for i := range recs {
		id := strconv.Itoa(i + 1)
		b := fmt.Appendf(nil, `{"id":%q,"name":"item %d","qty":%d}`, id, i+1, i%7+1)
		recs[i] = record{id: id, size: int64(len(b)), hash: sha256.Sum256(b), body: func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(b)), nil
		}}
	}
	return recs
}

// maxLine is the longest line read, terminator included.
const maxLine = 16 << 20

// readFile indexes the JSON lines of a file: each record's body is a
// section of the file, opened again for each attempt, so a file of any size
// is uploaded without being loaded into memory.
func readFile(f *os.File) ([]record, error) {
	return scanRecords(f, f.Name(), func(content []byte, off int64) func() (io.ReadCloser, error) {
		n := int64(len(content))
		return func() (io.ReadCloser, error) {
			return sectionCloser{io.NewSectionReader(f, off, n)}, nil
		}
	})
}

// readAll reads JSON lines from a stream that cannot be read twice (stdin,
// a pipe), so each record is kept in memory.
func readAll(r io.Reader) ([]record, error) { return readStream(r, "stdin") }

// readStream is readAll for a stream called name in errors.
func readStream(r io.Reader, name string) ([]record, error) {
	return scanRecords(r, name, func(content []byte, _ int64) func() (io.ReadCloser, error) {
		b := bytes.Clone(content)
		return func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(b)), nil
		}
	})
}

// scanRecords splits r into records; body makes the body of the record
// whose content is at offset off of r (content is only valid during the
// call).
func scanRecords(r io.Reader, name string, body func(content []byte, off int64) func() (io.ReadCloser, error)) ([]record, error) {
	var recs []record
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	sc.Split(splitLines)
	var off int64
	line := 0
	for sc.Scan() {
		line++
		raw := sc.Bytes()
		content := lineContent(raw)
		start := off
		off += int64(len(raw))
		if len(bytes.TrimSpace(content)) == 0 {
			continue
		}
		id, err := recordID(content, line)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		recs = append(recs, record{id: id, line: line, size: int64(len(content)), hash: sha256.Sum256(content), body: body(content, start)})
	}
	if err := sc.Err(); errors.Is(err, bufio.ErrTooLong) {
		return nil, fmt.Errorf("%s: line %d: longer than %d MiB", name, line+1, maxLine>>20)
	} else if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	return recs, nil
}

// splitLines is a bufio.SplitFunc whose tokens are whole lines, terminator
// included, so that their lengths add up to offsets in the input.
func splitLines(data []byte, atEOF bool) (advance int, token []byte, err error) {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return i + 1, data[:i+1], nil
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}

// lineContent is a line without its terminator, "\n" or "\r\n".
func lineContent(line []byte) []byte {
	if c, ok := bytes.CutSuffix(line, []byte("\n")); ok {
		c, _ = bytes.CutSuffix(c, []byte("\r"))
		return c
	}
	return line
}

// recordID is the record's "id" field, a string or a number, or else its
// line number. It becomes one segment of the URL's path, escaped, so it
// can hold any character; but "." and ".." would still be read as "this
// directory" and "its parent" by a server or proxy, and are refused.
func recordID(raw []byte, line int) (string, error) {
	if t := bytes.TrimLeft(raw, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return "", fmt.Errorf("line %d: not a JSON object", line)
	}
	var v struct {
		ID json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", fmt.Errorf("line %d: not a JSON object: %w", line, err)
	}
	var id string
	switch {
	case len(v.ID) == 0 || string(v.ID) == "null":
	case v.ID[0] == '"':
		if err := json.Unmarshal(v.ID, &id); err != nil {
			return "", fmt.Errorf("line %d: id: %w", line, err)
		}
	case v.ID[0] == '-' || '0' <= v.ID[0] && v.ID[0] <= '9':
		id = string(v.ID)
	default:
		return "", fmt.Errorf("line %d: id %s: want a string or a number", line, v.ID)
	}
	switch id {
	case "":
		return strconv.Itoa(line), nil
	case ".", "..":
		return "", fmt.Errorf("line %d: id %q cannot be a URL path segment", line, id)
	}
	return id, nil
}

// sectionCloser is a section of the input file; closing it leaves the file
// open for the other records.
type sectionCloser struct{ *io.SectionReader }

func (sectionCloser) Close() error { return nil }
