package term

import (
	"bufio"
	"errors"
	"strings"
	"testing"
)

// TestChatLineProtocolSkipsAHugeLine: a line over the limit is reported and skipped; the lines after it are read.
func TestChatLineProtocolSkipsAHugeLine(t *testing.T) {
	const max = 1 << 20
	huge := strings.Repeat("x", max+10)
	r := bufio.NewReaderSize(strings.NewReader("first\r\n"+huge+"\nthird\nlast"), 64*1024)
	var got []string
	for {
		l, err := ReadLine(r, max)
		if errors.Is(err, ErrLineTooLong) {
			got = append(got, "<too long>")
			continue
		}
		if err != nil {
			break
		}
		got = append(got, l)
	}
	if strings.Join(got, "|") != "first|<too long>|third|last" {
		t.Fatalf("lines %q", got)
	}
}
