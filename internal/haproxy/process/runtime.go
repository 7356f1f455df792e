package process

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
)

// prompt ends every answer in the runtime API's interactive mode: the
// answer's text, a newline, then "> " (an empty answer is "\n> ").
var prompt = []byte("\n> ")

// maxBatchAnswer bounds one answer of a batch: `set server` answers with
// one line.
const maxBatchAnswer = 64 << 10

// RuntimeBatch sends cmds, in order, over ONE connection to a worker's
// stats socket (the runtime API) and hands each answer to check, which
// says whether it is an error. It stops at the first command that fails
// (a refused answer or an I/O error), so later commands never run on a
// state the plan did not expect, and returns that failure.
//
// It uses the interactive mode ("prompt"): each answer ends with a
// prompt, so answers are told apart. Commands joined by ';' on one line
// would run too, but their answers arrive concatenated and a failure
// cannot be pinned to its command, nor the rest held back. Each command
// is checked like Runtime's: one command, no ';', newline or control
// character.
func (i *Instance) RuntimeBatch(ctx context.Context, socketPath string, cmds []string, check func(cmd, answer string) error) error {
	for _, c := range cmds {
		if err := singleCommand(c); err != nil {
			return err
		}
	}
	if len(cmds) == 0 {
		return nil
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultCLITimeout)
		defer cancel()
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socketPath)
	if err != nil {
		return err
	}
	defer conn.Close()
	i.runtimeConns.Add(1)
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	r := bufio.NewReader(conn)
	if _, err := ask(conn, r, "prompt"); err != nil {
		return fmt.Errorf("%s: prompt: %w", socketPath, err)
	}
	for _, c := range cmds {
		answer, err := ask(conn, r, c)
		if err != nil {
			return fmt.Errorf("%s: %q: %w", socketPath, c, err)
		}
		if err := check(c, answer); err != nil {
			return err
		}
	}
	_, _ = conn.Write([]byte("quit\n"))
	return nil
}

// ask writes one command and reads its answer up to the prompt.
func ask(conn net.Conn, r *bufio.Reader, cmd string) (string, error) {
	if _, err := conn.Write([]byte(cmd + "\n")); err != nil {
		return "", err
	}
	// Read up to each '>' (rare in answers; a byte at a time cost the
	// member reads of thousands of backends more than HAProxy's answers
	// did), then the byte after it: the answer ends at the first prompt.
	var answer []byte
	for {
		chunk, err := r.ReadSlice(prompt[1])
		answer = append(answer, chunk...)
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return "", err
		}
		if err == nil && bytes.HasSuffix(answer, prompt[:2]) {
			b, err := r.ReadByte()
			if err != nil {
				return "", err
			}
			answer = append(answer, b)
			if b == prompt[2] {
				break
			}
		}
		if len(answer) > maxBatchAnswer {
			return "", errors.New("answer too long")
		}
	}
	return string(bytes.TrimSpace(answer[:len(answer)-len(prompt)])), nil
}
