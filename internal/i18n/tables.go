package i18n

import (
	"fmt"

	"github.com/kassahq/kassa/order"
)

// nbsp groups thousands in Swedish, Norwegian and Finnish, as a no-break
// space, so that an amount never wraps within itself.
const nbsp = "\u00a0"

var tables = map[string]*Texts{English: &en, "sv": &sv, "nb": &nb, "da": &da, "fi": &fi}

// en is what the pages said before they were translated, word for word:
// an English page, and every document issued before kassa recorded a
// language, renders as it did.
var en = Texts{
	Tag: "en", Group: ",", Point: ".", DateLayout: "2006-01-02",
	checkoutTexts: checkoutTexts{
		Checkout: "Checkout", YourOrder: "Your order", Item: "Item", Qty: "Qty", Total: "Total", VATOf: "VAT",
		CorrectFollowing: "Please correct the following", FindCompany: "Find your company",
		CompanyQuery: "Company name or registration number", Search: "Search", YourCompany: "Your company",
		NoMatch:      "No company matched. Try another name or the registration number.",
		NoMatchShort: "No company matched.", SearchAbove: "Search for your company above.",
		ContactBilling: "Contact and billing", FirstName: "First name", LastName: "Last name",
		Email: "Email for invoices", Phone: "Phone (optional)", Street: "Street address", PostalCode: "Postal code",
		City: "City", PaymentMethod: "Payment method", Approve: "Approve purchase", Decline: "Decline",
		Approved: "Purchase approved", BackToShop: "Back to the shop", Placed: "Your order has been placed.",
		NoPurchase:  "No purchase was made.",
		ThanksFmt:   "Thank you. %s approved this purchase by %s. You can close this page.",
		ThanksPlain: "Thank you. You can close this page.",

		ChooseCompany: "Choose your company from the search results.", EnterFirstName: "Enter your first name.",
		EnterLastName: "Enter your last name.", EnterEmail: "Enter the email address invoices should go to.",
		EnterStreet: "Enter the street address.", EnterPostalCode: "Enter the postal code.", EnterCity: "Enter the city.",
		ChoosePayment: "Choose a payment method.", ChooseOffered: "Choose one of the payment methods offered.",

		TooManySearches: "Too many searches from your address. Wait a second and search again.",
		OrderChanged:    "The order changed while you were filling in this page. Check it above and confirm again.",
		CreditRefused:   "We could not approve credit for this company. Choose another payment method such as card, or decline.",
		LinkInvalid:     "This checkout link is not valid.",
		TryLater:        "Something went wrong. Please try again later.",
		Unavailable:     "The service is briefly unavailable. Please try again in a moment.",
	},
	documentTexts: documentTexts{
		Invoice: "Invoice", CreditNote: "Credit note", Receipt: "Receipt", VoidMark: "(void)",
		VoidInvoice:     "This invoice is void: nothing is payable on it.",
		RecourseInvoice: "This invoice was handed back to the merchant (recourse): what is outstanding on it is owed to the merchant.",
		Order:           "Order", MerchantReference: "merchant reference", Date: "Date", DueDate: "Due date", Seller: "Seller", Buyer: "Buyer",
		BillingAddress: "Billing address", CreditsInvoiceFmt: "Credits invoice %s of %s.", CreditsReceiptFmt: "Credits receipt %s of %s.",
		Lines: "Lines", Description: "Description", Quantity: "Quantity", UnitPrice: "Unit price", UnitDiscount: "Unit discount",
		VATRate: "VAT %", VAT: "VAT", LineTotal: "Total", InclVAT: "incl. VAT", ExclVAT: "excl. VAT",
		VATBreakdown: "VAT breakdown", Rate: "Rate %", NetHead: "Excl. VAT", GrossHead: "Incl. VAT", DocTotal: "Total",
		PaymentStatus: "Payment status", Invoiced: "Invoiced", Credited: "Credited", Paid: "Paid",
		Outstanding: "Outstanding", DueToBuyer: "Due to the buyer", Attention: "attn. ",
		RemainingBalanceFmt: "Remaining balance at %s %% VAT",
	},
	// An invoice's term is the one its due date is reckoned with
	// (order.PaymentTermDays), in every language: the two cannot disagree.
	PaymentMethods: map[string]string{"invoice": fmt.Sprintf("Invoice (pay within %d days)", order.PaymentTermDays), "advanceInvoice": "Advance invoice (pay before delivery)",
		"card": "Card", "partPayment": "Part payment", "bankTransfer": "Bank transfer", "paypal": "PayPal"},
	SessionStateTitle: map[string]string{"cancelled": "This checkout is cancelled", "expired": "This checkout is expired"},
}

var sv = Texts{
	Tag: "sv", Group: nbsp, Point: ",", DateLayout: "2006-01-02",
	checkoutTexts: checkoutTexts{
		Checkout: "Kassa", YourOrder: "Din beställning", Item: "Artikel", Qty: "Antal", Total: "Totalt", VATOf: "varav moms",
		CorrectFollowing: "Rätta följande", FindCompany: "Hitta ditt företag",
		CompanyQuery: "Företagsnamn eller organisationsnummer", Search: "Sök", YourCompany: "Ditt företag",
		NoMatch:      "Inget företag hittades. Prova ett annat namn eller organisationsnumret.",
		NoMatchShort: "Inget företag hittades.", SearchAbove: "Sök efter ditt företag ovan.",
		ContactBilling: "Kontakt och fakturering", FirstName: "Förnamn", LastName: "Efternamn",
		Email: "E-post för fakturor", Phone: "Telefon (valfritt)", Street: "Gatuadress", PostalCode: "Postnummer",
		City: "Ort", PaymentMethod: "Betalningssätt", Approve: "Godkänn köpet", Decline: "Avböj",
		Approved: "Köpet är godkänt", BackToShop: "Tillbaka till butiken", Placed: "Din beställning är lagd.",
		NoPurchase:  "Inget köp har gjorts.",
		ThanksFmt:   "Tack. %s har godkänt köpet. Betalningssätt: %s. Du kan stänga sidan.",
		ThanksPlain: "Tack. Du kan stänga sidan.",

		ChooseCompany: "Välj ditt företag bland sökresultaten.", EnterFirstName: "Ange ditt förnamn.",
		EnterLastName: "Ange ditt efternamn.", EnterEmail: "Ange e-postadressen som fakturorna ska skickas till.",
		EnterStreet: "Ange gatuadressen.", EnterPostalCode: "Ange postnumret.", EnterCity: "Ange orten.",
		ChoosePayment: "Välj ett betalningssätt.", ChooseOffered: "Välj ett av de erbjudna betalningssätten.",
		BadEmail:      "Ange en giltig e-postadress.",
		BadField:      "Kontrollera fältet: det är för långt eller innehåller ogiltiga tecken.",
		SearchRefused: "Kontrollera sökningen: ange ett företagsnamn eller ett giltigt organisationsnummer.",

		TooManySearches: "För många sökningar från din adress. Vänta en sekund och sök igen.",
		OrderChanged:    "Beställningen ändrades medan du fyllde i sidan. Kontrollera den ovan och bekräfta igen.",
		CreditRefused:   "Vi kunde inte bevilja kredit för det här företaget. Välj ett annat betalningssätt, till exempel kort, eller avböj.",
		LinkInvalid:     "Länken till kassan är inte giltig.",
		TryLater:        "Något gick fel. Försök igen senare.",
		Unavailable:     "Tjänsten är tillfälligt otillgänglig. Försök igen om en stund.",
	},
	documentTexts: documentTexts{
		Invoice: "Faktura", CreditNote: "Kreditfaktura", Receipt: "Kvitto", VoidMark: "(makulerad)",
		VoidInvoice:     "Fakturan är makulerad: inget ska betalas på den.",
		RecourseInvoice: "Fakturan har lämnats tillbaka till säljaren (regress): det som återstår att betala ska betalas till säljaren.",
		Order:           "Order", MerchantReference: "säljarens referens", Date: "Datum", DueDate: "Förfallodatum", Seller: "Säljare", Buyer: "Köpare",
		BillingAddress: "Fakturaadress", CreditsInvoiceFmt: "Krediterar faktura %s daterad %s.", CreditsReceiptFmt: "Krediterar kvitto %s daterat %s.",
		Lines: "Rader", Description: "Beskrivning", Quantity: "Antal", UnitPrice: "À-pris", UnitDiscount: "Rabatt per enhet",
		VATRate: "Moms %", VAT: "Moms", LineTotal: "Belopp", InclVAT: "inkl. moms", ExclVAT: "exkl. moms",
		VATBreakdown: "Momsspecifikation", Rate: "Momssats %", NetHead: "Exkl. moms", GrossHead: "Inkl. moms", DocTotal: "Totalt",
		PaymentStatus: "Betalningsstatus", Invoiced: "Fakturerat", Credited: "Krediterat", Paid: "Betalt",
		Outstanding: "Att betala", DueToBuyer: "Att återbetala till köparen", Attention: "att. ",
		RemainingBalanceFmt: "Återstående belopp med %s %% moms",
	},
	PaymentMethods: map[string]string{"invoice": fmt.Sprintf("Faktura (betala inom %d dagar)", order.PaymentTermDays), "advanceInvoice": "Förskottsfaktura (betala före leverans)",
		"card": "Kort", "partPayment": "Delbetalning", "bankTransfer": "Banköverföring", "paypal": "PayPal"},
	SessionStateTitle: map[string]string{"cancelled": "Köpet avbröts", "expired": "Tiden för köpet har gått ut"},
}

var nb = Texts{
	Tag: "nb", Group: nbsp, Point: ",", DateLayout: "02.01.2006",
	checkoutTexts: checkoutTexts{
		Checkout: "Kasse", YourOrder: "Din bestilling", Item: "Vare", Qty: "Antall", Total: "Totalt", VATOf: "herav mva",
		CorrectFollowing: "Rett følgende", FindCompany: "Finn bedriften din",
		CompanyQuery: "Firmanavn eller organisasjonsnummer", Search: "Søk", YourCompany: "Din bedrift",
		NoMatch:      "Ingen bedrift ble funnet. Prøv et annet navn eller organisasjonsnummeret.",
		NoMatchShort: "Ingen bedrift ble funnet.", SearchAbove: "Søk etter bedriften din ovenfor.",
		ContactBilling: "Kontakt og fakturering", FirstName: "Fornavn", LastName: "Etternavn",
		Email: "E-post for fakturaer", Phone: "Telefon (valgfritt)", Street: "Gateadresse", PostalCode: "Postnummer",
		City: "Poststed", PaymentMethod: "Betalingsmåte", Approve: "Godkjenn kjøpet", Decline: "Avslå",
		Approved: "Kjøpet er godkjent", BackToShop: "Tilbake til butikken", Placed: "Bestillingen din er registrert.",
		NoPurchase:  "Ingen kjøp ble gjennomført.",
		ThanksFmt:   "Takk. %s har godkjent kjøpet. Betalingsmåte: %s. Du kan lukke siden.",
		ThanksPlain: "Takk. Du kan lukke siden.",

		ChooseCompany: "Velg bedriften din blant søkeresultatene.", EnterFirstName: "Skriv inn fornavnet ditt.",
		EnterLastName: "Skriv inn etternavnet ditt.", EnterEmail: "Skriv inn e-postadressen fakturaene skal sendes til.",
		EnterStreet: "Skriv inn gateadressen.", EnterPostalCode: "Skriv inn postnummeret.", EnterCity: "Skriv inn poststedet.",
		ChoosePayment: "Velg en betalingsmåte.", ChooseOffered: "Velg en av betalingsmåtene som tilbys.",
		BadEmail:      "Skriv inn en gyldig e-postadresse.",
		BadField:      "Kontroller feltet: det er for langt eller inneholder ugyldige tegn.",
		SearchRefused: "Kontroller søket: skriv inn et firmanavn eller et gyldig organisasjonsnummer.",

		TooManySearches: "For mange søk fra adressen din. Vent et sekund og søk igjen.",
		OrderChanged:    "Bestillingen ble endret mens du fylte ut siden. Kontroller den ovenfor og bekreft på nytt.",
		CreditRefused:   "Vi kunne ikke innvilge kreditt for denne bedriften. Velg en annen betalingsmåte, for eksempel kort, eller avslå.",
		LinkInvalid:     "Lenken til kassen er ikke gyldig.",
		TryLater:        "Noe gikk galt. Prøv igjen senere.",
		Unavailable:     "Tjenesten er midlertidig utilgjengelig. Prøv igjen om litt.",
	},
	documentTexts: documentTexts{
		Invoice: "Faktura", CreditNote: "Kreditnota", Receipt: "Kvittering", VoidMark: "(annullert)",
		VoidInvoice:     "Fakturaen er annullert: ingenting skal betales på den.",
		RecourseInvoice: "Fakturaen er overført tilbake til selgeren (regress): det som gjenstår å betale, skal betales til selgeren.",
		Order:           "Ordre", MerchantReference: "selgers referanse", Date: "Dato", DueDate: "Forfallsdato", Seller: "Selger", Buyer: "Kjøper",
		BillingAddress: "Fakturaadresse", CreditsInvoiceFmt: "Krediterer faktura %s datert %s.", CreditsReceiptFmt: "Krediterer kvittering %s datert %s.",
		Lines: "Linjer", Description: "Beskrivelse", Quantity: "Antall", UnitPrice: "Enhetspris", UnitDiscount: "Rabatt per enhet",
		VATRate: "Mva %", VAT: "Mva", LineTotal: "Beløp", InclVAT: "inkl. mva", ExclVAT: "ekskl. mva",
		VATBreakdown: "Mva-spesifikasjon", Rate: "Mva-sats %", NetHead: "Ekskl. mva", GrossHead: "Inkl. mva", DocTotal: "Totalt",
		PaymentStatus: "Betalingsstatus", Invoiced: "Fakturert", Credited: "Kreditert", Paid: "Betalt",
		Outstanding: "Å betale", DueToBuyer: "Til gode for kjøper", Attention: "att. ",
		RemainingBalanceFmt: "Gjenstående beløp med %s %% mva",
	},
	PaymentMethods: map[string]string{"invoice": fmt.Sprintf("Faktura (betal innen %d dager)", order.PaymentTermDays), "advanceInvoice": "Forskuddsfaktura (betal før levering)",
		"card": "Kort", "partPayment": "Delbetaling", "bankTransfer": "Bankoverføring", "paypal": "PayPal"},
	SessionStateTitle: map[string]string{"cancelled": "Kjøpet ble avbrutt", "expired": "Tiden for kjøpet har gått ut"},
}

var da = Texts{
	Tag: "da", Group: ".", Point: ",", DateLayout: "02.01.2006",
	checkoutTexts: checkoutTexts{
		Checkout: "Kasse", YourOrder: "Din bestilling", Item: "Vare", Qty: "Antal", Total: "I alt", VATOf: "heraf moms",
		CorrectFollowing: "Ret følgende", FindCompany: "Find din virksomhed",
		CompanyQuery: "Virksomhedsnavn eller CVR-nummer", Search: "Søg", YourCompany: "Din virksomhed",
		NoMatch:      "Ingen virksomhed fundet. Prøv et andet navn eller CVR-nummeret.",
		NoMatchShort: "Ingen virksomhed fundet.", SearchAbove: "Søg efter din virksomhed ovenfor.",
		ContactBilling: "Kontakt og fakturering", FirstName: "Fornavn", LastName: "Efternavn",
		Email: "E-mail til fakturaer", Phone: "Telefon (valgfrit)", Street: "Adresse", PostalCode: "Postnummer",
		City: "By", PaymentMethod: "Betalingsmetode", Approve: "Godkend købet", Decline: "Afvis",
		Approved: "Købet er godkendt", BackToShop: "Tilbage til butikken", Placed: "Din bestilling er afgivet.",
		NoPurchase:  "Der blev ikke foretaget noget køb.",
		ThanksFmt:   "Tak. %s har godkendt købet. Betalingsmetode: %s. Du kan lukke siden.",
		ThanksPlain: "Tak. Du kan lukke siden.",

		ChooseCompany: "Vælg din virksomhed blandt søgeresultaterne.", EnterFirstName: "Angiv dit fornavn.",
		EnterLastName: "Angiv dit efternavn.", EnterEmail: "Angiv den e-mailadresse, fakturaerne skal sendes til.",
		EnterStreet: "Angiv adressen.", EnterPostalCode: "Angiv postnummeret.", EnterCity: "Angiv byen.",
		ChoosePayment: "Vælg en betalingsmetode.", ChooseOffered: "Vælg en af de tilbudte betalingsmetoder.",
		BadEmail:      "Angiv en gyldig e-mailadresse.",
		BadField:      "Kontrollér feltet: det er for langt eller indeholder ugyldige tegn.",
		SearchRefused: "Kontrollér søgningen: angiv et virksomhedsnavn eller et gyldigt CVR-nummer.",

		TooManySearches: "For mange søgninger fra din adresse. Vent et sekund, og søg igen.",
		OrderChanged:    "Bestillingen blev ændret, mens du udfyldte siden. Kontrollér den ovenfor, og bekræft igen.",
		CreditRefused:   "Vi kunne ikke godkende kredit til denne virksomhed. Vælg en anden betalingsmetode, f.eks. kort, eller afvis.",
		LinkInvalid:     "Linket til kassen er ikke gyldigt.",
		TryLater:        "Noget gik galt. Prøv igen senere.",
		Unavailable:     "Tjenesten er midlertidigt utilgængelig. Prøv igen om lidt.",
	},
	documentTexts: documentTexts{
		Invoice: "Faktura", CreditNote: "Kreditnota", Receipt: "Kvittering", VoidMark: "(annulleret)",
		VoidInvoice:     "Fakturaen er annulleret: der skal ikke betales noget på den.",
		RecourseInvoice: "Fakturaen er overdraget tilbage til sælgeren (regres): det resterende beløb skal betales til sælgeren.",
		Order:           "Ordre", MerchantReference: "sælgers reference", Date: "Dato", DueDate: "Forfaldsdato", Seller: "Sælger", Buyer: "Køber",
		BillingAddress: "Faktureringsadresse", CreditsInvoiceFmt: "Krediterer faktura %s dateret %s.", CreditsReceiptFmt: "Krediterer kvittering %s dateret %s.",
		Lines: "Linjer", Description: "Beskrivelse", Quantity: "Antal", UnitPrice: "Enhedspris", UnitDiscount: "Rabat pr. enhed",
		VATRate: "Moms %", VAT: "Moms", LineTotal: "Beløb", InclVAT: "inkl. moms", ExclVAT: "ekskl. moms",
		VATBreakdown: "Momsspecifikation", Rate: "Momssats %", NetHead: "Ekskl. moms", GrossHead: "Inkl. moms", DocTotal: "I alt",
		PaymentStatus: "Betalingsstatus", Invoiced: "Faktureret", Credited: "Krediteret", Paid: "Betalt",
		Outstanding: "Til betaling", DueToBuyer: "Til gode for køber", Attention: "att. ",
		RemainingBalanceFmt: "Resterende beløb med %s %% moms",
	},
	PaymentMethods: map[string]string{"invoice": fmt.Sprintf("Faktura (betal inden %d dage)", order.PaymentTermDays), "advanceInvoice": "Forudbetalingsfaktura (betal før levering)",
		"card": "Kort", "partPayment": "Afbetaling", "bankTransfer": "Bankoverførsel", "paypal": "PayPal"},
	SessionStateTitle: map[string]string{"cancelled": "Købet blev annulleret", "expired": "Tiden for købet er udløbet"},
}

var fi = Texts{
	Tag: "fi", Group: nbsp, Point: ",", DateLayout: "2.1.2006",
	checkoutTexts: checkoutTexts{
		Checkout: "Kassa", YourOrder: "Tilauksesi", Item: "Tuote", Qty: "Määrä", Total: "Yhteensä", VATOf: "josta ALV",
		CorrectFollowing: "Korjaa seuraavat", FindCompany: "Hae yrityksesi",
		CompanyQuery: "Yrityksen nimi tai Y-tunnus", Search: "Hae", YourCompany: "Yrityksesi",
		NoMatch:      "Yritystä ei löytynyt. Kokeile toista nimeä tai Y-tunnusta.",
		NoMatchShort: "Yritystä ei löytynyt.", SearchAbove: "Hae yrityksesi yllä.",
		ContactBilling: "Yhteys- ja laskutustiedot", FirstName: "Etunimi", LastName: "Sukunimi",
		Email: "Sähköposti laskuille", Phone: "Puhelin (vapaaehtoinen)", Street: "Katuosoite", PostalCode: "Postinumero",
		City: "Postitoimipaikka", PaymentMethod: "Maksutapa", Approve: "Hyväksy osto", Decline: "Hylkää",
		Approved: "Osto on hyväksytty", BackToShop: "Takaisin kauppaan", Placed: "Tilauksesi on tehty.",
		NoPurchase:  "Ostoa ei tehty.",
		ThanksFmt:   "Kiitos. %s hyväksyi oston. Maksutapa: %s. Voit sulkea sivun.",
		ThanksPlain: "Kiitos. Voit sulkea sivun.",

		ChooseCompany: "Valitse yrityksesi hakutuloksista.", EnterFirstName: "Anna etunimesi.",
		EnterLastName: "Anna sukunimesi.", EnterEmail: "Anna sähköpostiosoite, johon laskut lähetetään.",
		EnterStreet: "Anna katuosoite.", EnterPostalCode: "Anna postinumero.", EnterCity: "Anna postitoimipaikka.",
		ChoosePayment: "Valitse maksutapa.", ChooseOffered: "Valitse jokin tarjotuista maksutavoista.",
		BadEmail:      "Anna kelvollinen sähköpostiosoite.",
		BadField:      "Tarkista kenttä: se on liian pitkä tai sisältää virheellisiä merkkejä.",
		SearchRefused: "Tarkista haku: anna yrityksen nimi tai kelvollinen Y-tunnus.",

		TooManySearches: "Liian monta hakua osoitteestasi. Odota hetki ja hae uudelleen.",
		OrderChanged:    "Tilaus muuttui, kun täytit sivua. Tarkista se yltä ja vahvista uudelleen.",
		CreditRefused:   "Emme voineet myöntää luottoa tälle yritykselle. Valitse toinen maksutapa, esimerkiksi kortti, tai hylkää.",
		LinkInvalid:     "Kassan linkki ei ole voimassa.",
		TryLater:        "Jotain meni vikaan. Yritä myöhemmin uudelleen.",
		Unavailable:     "Palvelu on tilapäisesti poissa käytöstä. Yritä hetken kuluttua uudelleen.",
	},
	documentTexts: documentTexts{
		Invoice: "Lasku", CreditNote: "Hyvityslasku", Receipt: "Kuitti", VoidMark: "(mitätöity)",
		VoidInvoice:     "Lasku on mitätöity: sillä ei ole mitään maksettavaa.",
		RecourseInvoice: "Lasku on siirretty takaisin myyjälle (takautumisoikeus): avoin määrä maksetaan myyjälle.",
		Order:           "Tilaus", MerchantReference: "myyjän viite", Date: "Päiväys", DueDate: "Eräpäivä", Seller: "Myyjä", Buyer: "Ostaja",
		BillingAddress: "Laskutusosoite", CreditsInvoiceFmt: "Hyvittää laskun %s, päivätty %s.", CreditsReceiptFmt: "Hyvittää kuitin %s, päivätty %s.",
		Lines: "Rivit", Description: "Kuvaus", Quantity: "Määrä", UnitPrice: "Yksikköhinta", UnitDiscount: "Alennus/kpl",
		VATRate: "ALV %", VAT: "ALV", LineTotal: "Summa", InclVAT: "verollinen", ExclVAT: "veroton",
		VATBreakdown: "ALV-erittely", Rate: "ALV-kanta %", NetHead: "Veroton", GrossHead: "Verollinen", DocTotal: "Yhteensä",
		PaymentStatus: "Maksun tila", Invoiced: "Laskutettu", Credited: "Hyvitetty", Paid: "Maksettu",
		Outstanding: "Maksettavaa", DueToBuyer: "Palautetaan ostajalle", Attention: "attn. ",
		RemainingBalanceFmt: "Jäljellä oleva summa, ALV %s %%",
	},
	PaymentMethods: map[string]string{"invoice": fmt.Sprintf("Lasku (maksuaika %d päivää)", order.PaymentTermDays), "advanceInvoice": "Ennakkolasku (maksu ennen toimitusta)",
		"card": "Kortti", "partPayment": "Osamaksu", "bankTransfer": "Tilisiirto", "paypal": "PayPal"},
	SessionStateTitle: map[string]string{"cancelled": "Osto peruttiin", "expired": "Oston aika on umpeutunut"},
}
