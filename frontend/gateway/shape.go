package gateway

import (
	"fmt"
	"strings"

	"github.com/tidwall/gjson"
)

// checkMessages refuses a chat body whose messages the engine would misread or act on for the client: messages
// not a list of objects (llama-server answers those with a 500 the SDKs retry), content neither text nor a list
// of parts, and an image given by any URL other than a data URL. llama-server downloads an http(s) image_url
// itself, so passing one on would let any client make this machine fetch any address it can reach and read the
// image back through a vision model's answer; only images the client sent as bytes reach the engine.
// It returns the error's message and the param it names, or "" when the body is fine.
func checkMessages(body []byte) (msg, param string) {
	msgs := gjson.GetBytes(body, "messages")
	switch {
	case !msgs.Exists():
		return `no "messages": send "messages": [{"role": "user", "content": "…"}]`, "messages"
	case !msgs.IsArray():
		return fmt.Sprintf(`"messages" is %s, not a list: send "messages": [{"role": "user", "content": "…"}]`, jsonKind(msgs)), "messages"
	}
	msgs.ForEach(func(i, m gjson.Result) bool {
		where := fmt.Sprintf("messages[%d]", i.Int())
		if !m.IsObject() {
			msg, param = fmt.Sprintf(`%s is %s, not a message: send {"role": "user", "content": "…"}`, where, jsonKind(m)), where
			return false
		}
		c := m.Get("content")
		switch {
		case !c.Exists() || c.Type == gjson.Null || c.Type == gjson.String:
			return true
		case !c.IsArray():
			msg, param = fmt.Sprintf(`%s.content is %s: send text, or a list of parts such as {"type": "text", "text": "…"}`, where, jsonKind(c)), where+".content"
			return false
		}
		c.ForEach(func(j, p gjson.Result) bool {
			pw := fmt.Sprintf("%s.content[%d]", where, j.Int())
			if !p.IsObject() {
				msg, param = fmt.Sprintf(`%s is %s, not a content part: send {"type": "text", "text": "…"} or {"type": "image_url", "image_url": {"url": "data:image/png;base64,…"}}`, pw, jsonKind(p)), pw
				return false
			}
			if p.Get("type").String() != "image_url" {
				return true
			}
			u := p.Get("image_url.url")
			if p.Get("image_url").Type == gjson.String {
				u = p.Get("image_url")
			}
			if !strings.HasPrefix(u.String(), "data:") {
				msg, param = refuseImageURL(pw, u.String()), pw+".image_url.url"
				return false
			}
			return true
		})
		return msg == ""
	})
	return msg, param
}

// refuseImageURL says why an image URL that is not a data URL is refused, and what to send instead.
func refuseImageURL(where, u string) string {
	shown := u
	if len(shown) > 80 {
		shown = shown[:80] + "…"
	}
	if shown == "" {
		return fmt.Sprintf("%s has no image URL: send the image's bytes as a data URL, data:image/png;base64,…", where)
	}
	return fmt.Sprintf("%s: the image URL %q is not a data URL: this gateway takes images only as their bytes "+
		"(data:image/png;base64,…), so that the engine never fetches an address on a client's behalf; download the "+
		"image yourself and send it as a data URL", where, shown)
}

func jsonKind(r gjson.Result) string {
	switch {
	case r.Type == gjson.String:
		return "a string"
	case r.Type == gjson.Number:
		return "a number"
	case r.Type == gjson.True || r.Type == gjson.False:
		return "a boolean"
	case r.Type == gjson.Null:
		return "null"
	case r.IsArray():
		return "a list"
	case r.IsObject():
		return "an object"
	}
	return "not JSON"
}

// hasAnyImage reports whether any message of a chat body carries an image part.
func hasAnyImage(body []byte) bool {
	found := false
	gjson.GetBytes(body, "messages").ForEach(func(_, m gjson.Result) bool {
		m.Get("content").ForEach(func(_, p gjson.Result) bool {
			found = p.Get("type").String() == "image_url"
			return !found
		})
		return !found
	})
	return found
}
