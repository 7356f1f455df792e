package process

import (
	"bufio"
	"net"
	"strings"
	"testing"
)

// TestAskReadsToThePrompt: an answer ends at the first "\n> ", whatever
// '>' it holds before and however long it is.
func TestAskReadsToThePrompt(t *testing.T) {
	long := strings.Repeat("1 be_x 2 srv_y 127.0.0.1 2 0 1 1 5 6 0 0 0 0 0 0 - 80 - 0 0 - - 0\n", 200) // 13 KB: more than a read buffer
	for _, tc := range []struct {
		name, sent, want string
		err              bool
	}{
		{name: "prompt only", sent: "\n> ", want: ""},
		{name: "one line", sent: "Done.\n\n> ", want: "Done."},
		{name: "'>' inside", sent: "a > b\n>no prompt\n>>\n> ", want: "a > b\n>no prompt\n>>"},
		{name: "longer than the buffer", sent: long + "\n> ", want: strings.TrimSpace(long)},
		{name: "too long", sent: strings.Repeat("x", maxBatchAnswer+5000) + "\n> ", err: true},
		{name: "closed before the prompt", sent: "half an answer\n>", err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, server := net.Pipe()
			defer client.Close()
			go func() {
				defer server.Close()
				line, err := bufio.NewReader(server).ReadString('\n')
				if err != nil || line != "show x\n" {
					return
				}
				_, _ = server.Write([]byte(tc.sent))
				if !tc.err { // an answer that follows is not read with this one
					_, _ = server.Write([]byte("next answer\n> "))
				}
			}()
			got, err := ask(client, bufio.NewReader(client), "show x")
			if tc.err {
				if err == nil {
					t.Fatalf("answer %.40q…: no error", got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("answer %.80q, %v; want %.80q", got, err, tc.want)
			}
		})
	}
}
