package gateway

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/visorhq/visor/images"
	"github.com/visorhq/visor/internal/testkit"
)

// chatWithImages is a chat body whose user messages each carry one of shots as a data URL.
func chatWithImages(shots ...[]byte) []byte {
	var msgs []string
	for i, s := range shots {
		msgs = append(msgs, fmt.Sprintf(`{"role":"user","content":[{"type":"text","text":"shot %d"},{"type":"image_url","image_url":{"url":"data:image/png;base64,%s"}}]}`,
			i, base64.StdEncoding.EncodeToString(s)))
	}
	return []byte(`{"model":"m","messages":[` + strings.Join(msgs, ",") + `]}`)
}

// TestImagesPassIntakeOnce: an image that passed intake is known by its digest in the next request of the
// conversation and not decoded again (a policy that would now refuse it shows that it was not), while a bad
// image is refused every time and never remembered.
func TestImagesPassIntakeOnce(t *testing.T) {
	good, other := testkit.SeededPNG(t, 64, 48, 1), testkit.SeededPNG(t, 64, 48, 2)
	seen := newCheckedImages(8)
	if err := checkImages(chatWithImages(good), images.Limits{}, seen); err != nil {
		t.Fatal(err)
	}
	strict := images.Limits{MaxPixels: 100} // refuses both images, if it decodes them
	if err := checkImages(chatWithImages(good), strict, seen); err != nil {
		t.Errorf("the image that passed was decoded again: %v", err)
	}
	if err := checkImages(chatWithImages(good, other), strict, seen); err == nil || !strings.Contains(err.Error(), "messages[1].content[1]") {
		t.Errorf("a new image in the conversation was not checked: %v", err)
	}
	if err := checkImages(chatWithImages(good), strict, newCheckedImages(8)); err == nil {
		t.Error("without the digests the strict policy accepted the image")
	}
	bad := []byte("not an image")
	for range 2 {
		if err := checkImages(chatWithImages(bad), images.Limits{}, seen); err == nil || !strings.Contains(err.Error(), "not an image") {
			t.Errorf("a bad image: %v", err)
		}
	}
	if err := checkImages([]byte(`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,!!"}}]}]}`),
		images.Limits{}, seen); err == nil || !strings.Contains(err.Error(), "not valid base64") {
		t.Errorf("bad base64: %v", err)
	}
}

// TestCheckedImagesIsBounded: the oldest digest goes first once the set is full.
func TestCheckedImagesIsBounded(t *testing.T) {
	c := newCheckedImages(2)
	a, b, d := [32]byte{1}, [32]byte{2}, [32]byte{3}
	c.add(a)
	c.add(b)
	c.add(b)
	c.add(d)
	if c.has(a) || !c.has(b) || !c.has(d) || len(c.order) != 2 || len(c.set) != 2 {
		t.Fatalf("after a, b, b, d in a set of 2: a %v b %v d %v, %d in order, %d in set", c.has(a), c.has(b), c.has(d), len(c.order), len(c.set))
	}
}

// BenchmarkConversationImageChecks is the intake cost of one request in a conversation that has sent six 1440p
// screenshots: every image decoded (no digests kept, as before) against the digests of the images already
// passed. Reported as the ratio of the two, measured in the same run.
func BenchmarkConversationImageChecks(b *testing.B) {
	var shots [][]byte
	for i := range 6 {
		shots = append(shots, testkit.SeededPNG(b, 2560, 1440, i+1))
	}
	body := chatWithImages(shots...)
	seen := newCheckedImages(64)
	if err := checkImages(body, images.Limits{}, seen); err != nil {
		b.Fatal(err)
	}
	var fresh, known int64
	for b.Loop() {
		t0 := time.Now()
		if err := checkImages(body, images.Limits{}, newCheckedImages(64)); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := checkImages(body, images.Limits{}, seen); err != nil {
			b.Fatal(err)
		}
		fresh, known = fresh+t1.Sub(t0).Nanoseconds(), known+time.Now().Sub(t1).Nanoseconds()
	}
	b.ReportMetric(float64(fresh)/1e6/float64(b.N), "decode-all-ms")
	b.ReportMetric(float64(known)/1e6/float64(b.N), "digests-ms")
	b.ReportMetric(float64(known)/float64(fresh), "digests/decode-all")
}
