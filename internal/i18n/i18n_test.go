package i18n_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kassahq/kassa/internal/i18n"
	"github.com/kassahq/kassa/order"
	"github.com/kassahq/kassa/session"
)

// A field left empty in one language would show the buyer a blank label
// or button, so every language fills every string (English may leave the
// optional ones to the validation's own words), every payment method and
// every state a checkout ends in without a purchase.
func TestEveryLanguageIsComplete(t *testing.T) {
	optional := map[string]bool{"BadEmail": true, "BadField": true, "SearchRefused": true}
	for _, lang := range i18n.Languages() {
		tx := i18n.For(lang)
		if tx.Tag != lang {
			t.Errorf("table %s has tag %q", lang, tx.Tag)
		}
		var walk func(v reflect.Value)
		walk = func(v reflect.Value) {
			for i := 0; i < v.NumField(); i++ {
				f, ft := v.Field(i), v.Type().Field(i)
				switch f.Kind() {
				case reflect.Struct:
					walk(f)
				case reflect.String:
					if f.String() == "" && !(lang == i18n.English && optional[ft.Name]) {
						t.Errorf("%s: %s is empty", lang, ft.Name)
					}
				}
			}
		}
		walk(reflect.ValueOf(*tx))
		for _, pt := range order.PaymentTypes() {
			if tx.PaymentMethods[string(pt)] == "" {
				t.Errorf("%s: payment method %s has no name", lang, pt)
			}
		}
		for _, st := range []session.State{session.StateCancelled, session.StateExpired} {
			if tx.SessionStateTitle[string(st)] == "" {
				t.Errorf("%s: state %s has no heading", lang, st)
			}
		}
		for _, f := range []string{tx.ThanksFmt, tx.CreditsInvoiceFmt, tx.CreditsReceiptFmt} {
			if strings.Count(f, "%s") != 2 || strings.Count(f, "%") != 2 {
				t.Errorf("%s: %q must take exactly two strings", lang, f)
			}
		}
		// One string, the rate, and a literal percent sign.
		if f := tx.RemainingBalanceFmt; strings.Count(f, "%s") != 1 || strings.Count(f, "%%") != 1 || strings.Count(f, "%") != 3 {
			t.Errorf("%s: %q must take exactly one string and write one %%", lang, f)
		}
	}
}

func TestLanguageOfLocale(t *testing.T) {
	for locale, want := range map[string]string{"sv-SE": "sv", "sv-FI": "sv", "sv": "sv", "nb-NO": "nb", "no-NO": "nb", "nn-NO": "nb",
		"da-DK": "da", "fi-FI": "fi", "en-GB": "en", "de-DE": "en", "": "en", "xx": "en"} {
		if got := i18n.Language(locale); got != want {
			t.Errorf("Language(%q) = %q, want %q", locale, got, want)
		}
	}
}

func TestAmountsAndDatesAsTheLanguageWritesThem(t *testing.T) {
	day := time.Date(2026, 3, 4, 23, 0, 0, 0, time.FixedZone("x", -3600)) // 5 March in UTC
	for lang, want := range map[string][2]string{
		"en": {"-1,234,567.05", "2026-03-05"}, "sv": {"-1\u00a0234\u00a0567,05", "2026-03-05"},
		"nb": {"-1\u00a0234\u00a0567,05", "05.03.2026"}, "da": {"-1.234.567,05", "05.03.2026"}, "fi": {"-1\u00a0234\u00a0567,05", "5.3.2026"},
	} {
		tx := i18n.For(lang)
		if got := tx.FormatAmount(-123456705, "SEK"); got != want[0] {
			t.Errorf("%s amount %q, want %q", lang, got, want[0])
		}
		if got := tx.FormatDate(day); got != want[1] {
			t.Errorf("%s date %q, want %q", lang, got, want[1])
		}
	}
	if got := i18n.For("sv").FormatAmount(99, "SEK"); got != "0,99" {
		t.Errorf("sv 0.99 = %q", got)
	}
}
