package notify

import (
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestTopicsDocumented keeps docs/notifications.md's table of topics true:
// each topic that is not an order event type has a row of its own, each
// row names a topic there is, and its "subscribed" column says what Wants
// does with it. The order event types share the row `order.<event type>`,
// whose examples must be event types.
func TestTopicsDocumented(t *testing.T) {
	b, err := os.ReadFile("../docs/notifications.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	_, section, ok := strings.Cut(doc, "\n## Topics\n")
	if !ok {
		t.Fatal("docs/notifications.md has no section ## Topics")
	}
	known := append(Subscribable(), TopicAcknowledgementRequired)
	own := slices.DeleteFunc(slices.Clone(known), func(s string) bool {
		return slices.Contains(orderEventTopics, s) || s == AllOrderEvents
	})
	rows := map[string]string{} // topic → its "subscribed" column
	cell := regexp.MustCompile("^`([^`]+)`")
	started := false
	for line := range strings.Lines(section) {
		if !strings.HasPrefix(line, "|") {
			if started {
				break
			}
			continue
		}
		started = true
		cols := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if len(cols) != 3 {
			t.Fatalf("docs/notifications.md, ## Topics: a row of %d columns, not topic | when | subscribed: %q", len(cols), line)
		}
		m := cell.FindStringSubmatch(strings.TrimSpace(cols[0]))
		if m == nil {
			continue // the header and its rule
		}
		rows[m[1]] = strings.TrimSpace(cols[2])
		if m[1] == "order.<event type>" {
			for _, ex := range regexp.MustCompile("`(order\\.[A-Za-z]+)`").FindAllStringSubmatch(cols[0], -1) {
				if !slices.Contains(orderEventTopics, ex[1]) {
					t.Errorf("docs/notifications.md, ## Topics: %s, given as an order event type, is none (notify.OrderEventTopics)", ex[1])
				}
			}
		}
	}
	for _, topic := range own {
		if _, ok := rows[topic]; !ok {
			t.Errorf("topic %s has no row in docs/notifications.md's ## Topics: add | `%s` | when it is sent | %s |", topic, topic, subscribedText(topic))
		}
	}
	for _, topic := range slices.Sorted(maps.Keys(rows)) {
		subscribed, want := rows[topic], ""
		switch {
		case topic == "order.<event type>":
			for _, et := range orderEventTopics {
				if got := subscribedText(et); got != "by name, or all with `order.*`" {
					t.Errorf("order event topic %s is %q, not as the row `order.<event type>` says", et, got)
				}
			}
			want = "by name, or all with `order.*`"
		case slices.Contains(own, topic):
			want = subscribedText(topic)
		default:
			t.Errorf("docs/notifications.md, ## Topics: a row for %s, which is no topic (notify.Subscribable, TopicAcknowledgementRequired): remove it, or add the topic", topic)
			continue
		}
		if subscribed != want {
			t.Errorf("docs/notifications.md, ## Topics: %s is %q in the subscribed column, but Wants makes it %q", topic, subscribed, want)
		}
	}
	// Every topic the docs name elsewhere is one.
	for _, name := range []string{"../docs/notifications.md", "../docs/decisions.md", "../docs/sessions.md", "../README.md"} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile("`((?:order|session|document)\\.(?:[a-z][A-Za-z]*|\\*))`").FindAllStringSubmatch(string(b), -1) {
			if !slices.Contains(known, m[1]) {
				t.Errorf("%s names the topic %s, which there is not (notify.Subscribable, TopicAcknowledgementRequired)", strings.TrimPrefix(name, "../"), m[1])
			}
		}
	}
}

// subscribedText is what the "subscribed" column says of topic, read from Wants.
func subscribedText(topic string) string {
	switch {
	case Wants(nil, topic):
		return "always sent"
	case Wants([]string{AllOrderEvents}, topic):
		return "by name, or all with `order.*`"
	case Wants([]string{topic}, topic):
		return "by name"
	}
	return "never sent"
}
