package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
)

// A record is one JSON object to upload. Its body is never held by the
// uploader once read: body opens it afresh for every attempt, which is what
// Request.GetBody is for.
type record struct {
	id   string
	line int // 1-based line of the input, 0 when generated
	body func() (io.ReadCloser, error)
	size int64
}

// request builds the upload of r. GetBody makes it replayable, so the
// transport may retry it after a 429 without buffering it whole.
func (r record) request(method, url, apiKey string) (*http.Request, error) {
	body, err := r.body()
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		body.Close()
		return nil, err
	}
	req.GetBody = r.body
	req.ContentLength = r.size
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "record-"+r.id)
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
		recs[i] = record{id: id, size: int64(len(b)), body: func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(b)), nil
		}}
	}
	return recs
}

// readFile indexes the JSON lines of a file: each record's body is a
// section of the file, opened again for each attempt, so a file of any size
// is uploaded without being loaded into memory. The id is the record's "id"
// field, or else its line number.
func readFile(f *os.File) ([]record, error) {
	var recs []record
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var off int64
	for line := 1; sc.Scan(); line++ {
		raw := sc.Bytes()
		start, n := off, int64(len(raw))
		off += n + 1
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		id, err := recordID(raw, line)
		if err != nil {
			return nil, err
		}
		recs = append(recs, record{id: id, line: line, size: n, body: func() (io.ReadCloser, error) {
			return sectionCloser{io.NewSectionReader(f, start, n)}, nil
		}})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", f.Name(), err)
	}
	return recs, nil
}

// readAll reads JSON lines from a stream that cannot be read twice (stdin),
// so each record is kept in memory.
func readAll(r io.Reader) ([]record, error) {
	var recs []record
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for line := 1; sc.Scan(); line++ {
		raw := bytes.Clone(sc.Bytes())
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		id, err := recordID(raw, line)
		if err != nil {
			return nil, err
		}
		recs = append(recs, record{id: id, line: line, size: int64(len(raw)), body: func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(raw)), nil
		}})
	}
	return recs, sc.Err()
}

func recordID(raw []byte, line int) (string, error) {
	var v struct {
		ID json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", fmt.Errorf("line %d: not a JSON object: %w", line, err)
	}
	var s string
	if json.Unmarshal(v.ID, &s) == nil && s != "" {
		return s, nil
	}
	if len(v.ID) > 0 && v.ID[0] != 'n' { // a number
		return string(v.ID), nil
	}
	return strconv.Itoa(line), nil
}

// sectionCloser is a section of the input file; closing it leaves the file
// open for the other records.
type sectionCloser struct{ *io.SectionReader }

func (sectionCloser) Close() error { return nil }
