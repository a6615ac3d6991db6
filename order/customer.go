package order

import (
	"slices"
	"strings"

	"github.com/kassahq/kassa/fault"
)

// Limits on customer fields the spec leaves open.
const (
	maxEmailLen   = 254
	maxPhoneLen   = 30
	maxCompanyID  = 50
	maxDetailsLen = 200
)

func checkEmail(f *fault.Fields, path, s string) {
	if s == "" {
		return
	}
	checkText(f, path, s, maxEmailLen)
	at := strings.LastIndexByte(s, '@')
	if at < 1 || at == len(s)-1 || strings.ContainsAny(s, " \t\r\n") {
		f.Add(path, "must be an email address")
	}
}

// ValidateAddress checks a CompanyAddress against the spec's limits.
func ValidateAddress(f *fault.Fields, path string, a *Address) {
	if a == nil {
		return
	}
	checkText(f, path+".attentionName", a.AttentionName, 100)
	checkText(f, path+".careOf", a.CareOf, 100)
	checkText(f, path+".city", a.City, 50)
	checkText(f, path+".companyName", a.CompanyName, 100)
	checkText(f, path+".country", a.Country, 50)
	checkText(f, path+".postalCode", a.PostalCode, 10)
	checkText(f, path+".streetAddress", a.StreetAddress, 100)
	if c := a.Contact; c != nil {
		checkEmail(f, path+".contact.email", c.Email)
		checkText(f, path+".contact.firstName", c.FirstName, MaxTextLen)
		checkText(f, path+".contact.lastName", c.LastName, MaxTextLen)
		checkText(f, path+".contact.phone", c.Phone, maxPhoneLen)
	}
}

// Empty reports whether a (nil too) has no field set, an empty contact
// counted as none: such an address sent is no address.
func (a *Address) Empty() bool {
	if a == nil {
		return true
	}
	b := *a
	if b.Contact != nil && *b.Contact == (Contact{}) {
		b.Contact = nil
	}
	return b == (Address{})
}

// CustomerInput is the spec's OrderCustomerData (and, without ShippingAddress,
// CustomerTokenCustomerData). Every field is optional.
type CustomerInput struct {
	BillingAddress  *Address `json:"billingAddress,omitempty"`
	CompanyID       string   `json:"companyId,omitempty"`
	Country         string   `json:"country,omitempty"`
	Email           string   `json:"email,omitempty"`
	FirstName       string   `json:"firstName,omitempty"`
	LastName        string   `json:"lastName,omitempty"`
	Phone           string   `json:"phone,omitempty"`
	Reference1      string   `json:"reference1,omitempty"`
	Reference2      string   `json:"reference2,omitempty"`
	ShippingAddress *Address `json:"shippingAddress,omitempty"`
}

// Validate records every failure of c under path.
func (c *CustomerInput) Validate(f *fault.Fields, path string) {
	if c == nil {
		return
	}
	ValidateAddress(f, path+".billingAddress", c.BillingAddress)
	ValidateAddress(f, path+".shippingAddress", c.ShippingAddress)
	checkText(f, path+".companyId", c.CompanyID, maxCompanyID)
	checkText(f, path+".country", c.Country, 50)
	checkEmail(f, path+".email", c.Email)
	checkText(f, path+".firstName", c.FirstName, MaxTextLen)
	checkText(f, path+".lastName", c.LastName, MaxTextLen)
	checkText(f, path+".phone", c.Phone, maxPhoneLen)
	checkText(f, path+".reference1", c.Reference1, MaxTextLen)
	checkText(f, path+".reference2", c.Reference2, MaxTextLen)
}

// mergeInto lays the merchant's customer data over the authorized buyer.
// Empty fields leave the buyer's values.
func (c *CustomerInput) mergeInto(dst *Customer) {
	if c == nil {
		return
	}
	set := func(d *string, v string) {
		if v != "" {
			*d = v
		}
	}
	if !c.BillingAddress.Empty() {
		// One with no field is left as the empty fields are: it would
		// erase the buyer's, which every invoice must state.
		dst.BillingAddress = c.BillingAddress.clone()
	}
	if c.ShippingAddress != nil {
		dst.ShippingAddress = c.ShippingAddress.clone()
	}
	set(&dst.CompanyID, c.CompanyID)
	set(&dst.Country, c.Country)
	set(&dst.Email, c.Email)
	set(&dst.FirstName, c.FirstName)
	set(&dst.LastName, c.LastName)
	set(&dst.Phone, c.Phone)
	set(&dst.Reference1, c.Reference1)
	set(&dst.Reference2, c.Reference2)
}

// Invoice channel enums.
var (
	channelTypes        = []string{"email", "edi", "snailmail", "kivra"}
	channelDestinations = []string{"default", "channelOnly"}
)

// InvoiceChannelInput is the invoiceChannel object of EditCustomerRequest.
type InvoiceChannelInput struct {
	Type        string `json:"type,omitempty"`
	Destination string `json:"destination,omitempty"`
	Details     string `json:"details,omitempty"`
}

// EditCustomerRequest is the spec's EditCustomerRequest. Nil fields are left as they are.
type EditCustomerRequest struct {
	BillingAddress  *Address             `json:"billingAddress,omitempty"`
	ShippingAddress *Address             `json:"shippingAddress,omitempty"`
	Email           *string              `json:"email,omitempty"`
	Phone           *string              `json:"phone,omitempty"`
	Reference1      *string              `json:"reference1,omitempty"`
	Reference2      *string              `json:"reference2,omitempty"`
	InvoiceChannel  *InvoiceChannelInput `json:"invoiceChannel,omitempty"`
}

// Validate checks every field at once.
func (r *EditCustomerRequest) Validate() error {
	var f fault.Fields
	if *r == (EditCustomerRequest{}) {
		// Like edit payment method without paymentMethod: a body that
		// changes nothing would read as done (a client whose body lost its
		// fields) and still append an event and notify.
		f.Add("body", "names no customer field to change: send at least one of billingAddress, shippingAddress, email, phone, reference1, reference2, invoiceChannel")
	}
	if r.BillingAddress != nil && r.BillingAddress.Empty() {
		// The address sent replaces the order's whole: one with no field
		// (a client's struct marshalled beside the field it meant to
		// change) would erase what every later invoice must state.
		f.Add("billingAddress", "names no address field: send the buyer's whole billing address, which replaces the order's, or leave billingAddress out")
	}
	ValidateAddress(&f, "billingAddress", r.BillingAddress)
	ValidateAddress(&f, "shippingAddress", r.ShippingAddress)
	if r.Email != nil {
		checkEmail(&f, "email", *r.Email)
	}
	if r.Phone != nil {
		checkText(&f, "phone", *r.Phone, maxPhoneLen)
	}
	if r.Reference1 != nil {
		checkText(&f, "reference1", *r.Reference1, MaxTextLen)
	}
	if r.Reference2 != nil {
		checkText(&f, "reference2", *r.Reference2, MaxTextLen)
	}
	if ic := r.InvoiceChannel; ic != nil {
		if *ic == (InvoiceChannelInput{}) {
			f.Add("invoiceChannel", "names no field to change: send type, destination or details")
		}
		if ic.Type != "" && !slices.Contains(channelTypes, ic.Type) {
			f.Add("invoiceChannel.type", "must be one of %v", channelTypes)
		}
		if ic.Destination != "" && !slices.Contains(channelDestinations, ic.Destination) {
			f.Add("invoiceChannel.destination", "must be one of %v", channelDestinations)
		}
		checkText(&f, "invoiceChannel.details", ic.Details, maxDetailsLen)
	}
	return f.Err()
}

func (r *EditCustomerRequest) apply(c *Customer) {
	if r.BillingAddress != nil {
		c.BillingAddress = r.BillingAddress.clone()
	}
	if r.ShippingAddress != nil {
		c.ShippingAddress = r.ShippingAddress.clone()
	}
	if r.Email != nil {
		c.Email = *r.Email
	}
	if r.Phone != nil {
		c.Phone = *r.Phone
	}
	if r.Reference1 != nil {
		c.Reference1 = *r.Reference1
	}
	if r.Reference2 != nil {
		c.Reference2 = *r.Reference2
	}
	if ic := r.InvoiceChannel; ic != nil {
		ch := InvoiceChannel{State: "enabled", Destination: "default"}
		if c.InvoiceChannel != nil {
			ch = *c.InvoiceChannel
		}
		if ic.Type != "" {
			ch.Type = ic.Type
		}
		if ic.Destination != "" {
			ch.Destination = ic.Destination
		}
		if ic.Details != "" {
			ch.Details = ic.Details
		}
		c.InvoiceChannel = &ch
	}
}
