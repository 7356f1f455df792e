package rawhttp

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"time"
)

// outcome is what the client saw on one connection.
type outcome struct {
	// status is the first answer's code, or "closed" (EOF before any
	// answer), "reset", "timeout" (nothing within the wait), or
	// "garbage" (bytes that are not an HTTP/1.x response).
	status string
	// responses counts complete HTTP responses on the connection.
	responses int
	elapsed   time.Duration
}

// exchange writes raw to addr in one write, then reads responses until
// the server closes or wait passes.
func exchange(addr, raw string, wait time.Duration) (outcome, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return outcome{}, err
	}
	defer conn.Close()
	start := time.Now()
	conn.SetDeadline(start.Add(wait))
	if _, err := io.WriteString(conn, raw); err != nil {
		return outcome{}, err
	}
	var out outcome
	br := bufio.NewReader(conn)
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			if out.responses == 0 {
				out.status = classify(err)
			}
			break
		}
		if out.responses == 0 {
			out.status = strconv.Itoa(resp.StatusCode)
			out.elapsed = time.Since(start)
		}
		out.responses++
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if out.responses == 0 {
		out.elapsed = time.Since(start)
	}
	return out, nil
}

func classify(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return "closed"
	case errors.Is(err, syscall.ECONNRESET):
		return "reset"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return "garbage"
}
