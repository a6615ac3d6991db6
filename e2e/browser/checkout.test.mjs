// End-to-end test of the hosted checkout in headless Chromium: a merchant
// creates a payment session through the API, a buyer opens its checkout URL,
// searches their company, fills the form and approves; the API then shows the
// session authorized with a token, and an order is created from it.
//
// Needs: Debian's chromium (/usr/bin/chromium or CHROMIUM_PATH) and a kassa
// binary (KASSA_BIN, else built with go build). Run: npm test (from .ci/run).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = dirname(fileURLToPath(import.meta.url));
const artifacts = join(here, 'artifacts');
const auth = 'Basic ' + Buffer.from('e2e:e2e-secret-123').toString('base64');
let server, base, browser;

before(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'kassa-e2e-'));
  let bin = process.env.KASSA_BIN;
  if (!bin) {
    bin = join(dir, 'kassa');
    execFileSync('go', ['build', '-o', bin, './cmd/kassa'], { cwd: join(here, '..', '..'), stdio: 'inherit' });
  }
  server = spawn(bin, ['serve', '--addr', '127.0.0.1:0', '--data', join(dir, 'data'),
    '--client-id', 'e2e', '--client-secret', 'e2e-secret-123'], { stdio: ['ignore', 'pipe', 'ignore'] });
  base = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('kassa did not start')), 30000);
    let out = '';
    server.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/listening on (\S+)/);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
    server.on('exit', (code) => reject(new Error('kassa exited ' + code)));
  });
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  mkdirSync(artifacts, { recursive: true });
});

after(async () => {
  await browser?.close();
  server?.kill('SIGTERM');
});

async function api(method, path, body) {
  const res = await fetch(base + path, {
    method,
    headers: { authorization: auth, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : null };
}

// The buyer reads the page in the session's language: these tests' buyer
// reads English (en-SE), the last one Swedish.
async function newSession(reference, locale = 'en-SE') {
  const res = await api('POST', '/v1/payment-sessions', {
    country: 'SE', currency: 'SEK', locale, merchantReference: reference,
    orderLines: [{ description: 'Pallet of tiles', quantity: 2, unitPrice: 125000, vat: 2500 },
      { description: 'Delivery', quantity: 1, unitPrice: 50000, vat: 2500 }],
  });
  assert.equal(res.status, 201);
  assert.equal(res.headers.get('location'), '/v1/payment-sessions/' + res.body.id);
  assert.equal(res.body.state, 'created');
  assert.equal(res.body.totalOrderAmount.minorUnits, 300000);
  return res.body;
}

async function fillContact(page) {
  await page.getByLabel('First name').fill('Astrid');
  await page.getByLabel('Last name').fill('Lind');
  await page.getByLabel('Email for invoices').fill('ap@byggvaror.example');
  await page.getByLabel('Street address').fill('Verkstadsgatan 4');
  await page.getByLabel('Postal code').fill('41707');
  await page.getByLabel('City').fill('Göteborg');
}

test('buyer approves a payment session in the hosted checkout, then the merchant creates the order', async () => {
  const s = await newSession('PO-E2E-1');
  const page = await browser.newPage();
  await page.goto(s.checkoutUrl);
  assert.match(await page.title(), /Checkout/);

  // Every visible form control has a label (accessible names for screen readers).
  const unlabelled = await page.$$eval('input:not([type=hidden]), button',
    (els) => els.filter((e) => e.tagName === 'INPUT' ? e.labels.length === 0 : !e.textContent.trim()).map((e) => e.id));
  assert.deepEqual(unlabelled, []);

  // Submitting an empty form names every missing field in an alert summary.
  await page.click('#approve');
  const summary = page.getByRole('alert');
  await summary.waitFor();
  const problems = await summary.locator('li').allTextContents();
  assert.ok(problems.length >= 7, 'errors: ' + problems.join(' | '));

  // Search as you type (JavaScript enhancement): a whole registration number
  // with a wrong check digit is refused, and the refusal replaces the results.
  await page.getByLabel('Company name or registration number').fill('5560360794');
  const refusal = page.locator('#results p.error');
  await refusal.waitFor();
  assert.match(await refusal.textContent(), /not a valid SE registration number/);
  // Then search by name and choose the company.
  await page.getByLabel('Company name or registration number').fill('Approved Bygg');
  await page.locator('#results input[type=radio]').first().waitFor();
  await page.getByLabel(/Approved Byggvaror AB \(5560000001\)/).check();
  await fillContact(page);
  await page.getByLabel(/^Invoice/).check();
  await page.screenshot({ path: join(artifacts, 'checkout-form.png'), fullPage: true });
  // Approve with the keyboard.
  await page.focus('#approve');
  await page.keyboard.press('Enter');
  await page.locator('#result').waitFor();
  assert.equal(await page.locator('#result').textContent(), 'Purchase approved');
  await page.screenshot({ path: join(artifacts, 'checkout-approved.png'), fullPage: true });

  const after = await api('GET', '/v1/payment-sessions/' + s.id);
  assert.equal(after.body.state, 'authorized');
  assert.match(after.body.authorizationToken, /^at_/);
  assert.equal(after.body.buyer.companyId, '5560000001');
  assert.equal(after.body.paymentMethod.type, 'invoice');

  const order = await api('POST', `/v1/authorization-tokens/${after.body.authorizationToken}/order`, {
    country: 'SE', currency: 'SEK', locale: 'sv-SE', reference: 'PO-E2E-1',
    orderLines: [{ description: 'Pallet of tiles', quantity: 2, unitPrice: 125000, vat: 2500 },
      { description: 'Delivery', quantity: 1, unitPrice: 50000, vat: 2500 }],
  });
  assert.equal(order.status, 200);
  const done = await api('GET', '/v1/payment-sessions/' + s.id);
  assert.equal(done.body.state, 'completed');
  assert.equal(done.body.orderId, order.body.orderId);
  const o = await api('GET', '/v1/orders/' + order.body.orderId);
  assert.equal(o.body.orderAmount.minorUnits, 300000);
  assert.equal(o.body.customer.companyId, '5560000001');
  await page.close();
});

test('the checkout works without JavaScript', async () => {
  const s = await newSession('PO-E2E-2');
  const ctx = await browser.newContext({ javaScriptEnabled: false });
  const page = await ctx.newPage();
  await page.goto(s.checkoutUrl);
  await page.getByLabel('Company name or registration number').fill('556000-0001');
  await page.click('#search');
  await page.getByLabel(/Approved Byggvaror AB/).check();
  await fillContact(page);
  await page.getByLabel(/^Card/).check();
  await page.click('#approve');
  await page.locator('#result').waitFor();
  await page.screenshot({ path: join(artifacts, 'checkout-nojs.png'), fullPage: true });
  const after = await api('GET', '/v1/payment-sessions/' + s.id);
  assert.equal(after.body.state, 'authorized');
  assert.equal(after.body.paymentMethod.type, 'card');
  await ctx.close();
});

test('declining cancels the session; a tampered link is refused', async () => {
  const s = await newSession('PO-E2E-3');
  const page = await browser.newPage();
  await page.goto(s.checkoutUrl);
  await page.click('#decline');
  await page.locator('#result').waitFor();
  assert.match(await page.locator('#result').textContent(), /cancelled/);
  assert.equal((await api('GET', '/v1/payment-sessions/' + s.id)).body.state, 'cancelled');
  // Another first character of the signature: 'X' alone left one link in 64
  // (those whose signature began with X) untouched, and the test failed.
  const tampered = s.checkoutUrl.replace(/sig=(.)/, (_, c) => 'sig=' + (c === 'X' ? 'Y' : 'X'));
  assert.notEqual(tampered, s.checkoutUrl);
  const res = await page.goto(tampered);
  assert.equal(res.status(), 404);
  await page.close();
});

test('a Swedish buyer reads the checkout in Swedish, its script too', async () => {
  const s = await newSession('PO-E2E-4', 'sv-SE');
  const page = await browser.newPage();
  await page.goto(s.checkoutUrl);
  assert.match(await page.title(), /^Kassa/);
  assert.equal(await page.getAttribute('html', 'lang'), 'sv');
  assert.equal(await page.locator('#total').textContent(), '3\u00a0000,00');
  // The search as you type writes the page's language: its refusal of a
  // number with a wrong check digit, and a search that finds nothing.
  await page.getByLabel('Företagsnamn eller organisationsnummer').fill('5560360794');
  const refusal = page.locator('#results p.error');
  await refusal.waitFor();
  assert.match(await refusal.textContent(), /^Kontrollera sökningen/);
  await page.getByLabel('Företagsnamn eller organisationsnummer').fill('Zzqx Nonesuch');
  await page.locator('#results p:not(.error)').waitFor();
  assert.equal(await page.locator('#results p').textContent(), 'Inget företag hittades.');
  await page.getByLabel('Företagsnamn eller organisationsnummer').fill('Approved Bygg');
  await page.locator('#results input[type=radio]').first().waitFor();
  await page.getByLabel(/Approved Byggvaror AB \(5560000001\)/).check();
  await page.getByLabel('Förnamn').fill('Astrid');
  await page.getByLabel('Efternamn').fill('Lind');
  await page.getByLabel('E-post för fakturor').fill('ap@byggvaror.example');
  await page.getByLabel('Gatuadress').fill('Verkstadsgatan 4');
  await page.getByLabel('Postnummer').fill('41707');
  await page.getByLabel('Ort', { exact: true }).fill('Göteborg');
  await page.getByLabel(/^Faktura/).check();
  await page.getByRole('button', { name: 'Godkänn köpet' }).click();
  await page.locator('#result').waitFor();
  assert.equal(await page.locator('#result').textContent(), 'Köpet är godkänt');
  await page.screenshot({ path: join(artifacts, 'checkout-sv.png'), fullPage: true });
  await page.close();
});

test('on a slow network the results are those of the search in the box, not of one typed before it', async () => {
  const s = await newSession('PO-E2E-5');
  const page = await browser.newPage();
  // The first search's answer is held back until the second's has been shown.
  let release;
  const held = new Promise((resolve) => { release = resolve; });
  await page.route('**/v1/headless/search/companies?*', async (route) => {
    if (new URL(route.request().url()).searchParams.get('q') === 'Approved Bygg') await held;
    await route.continue();
  });
  await page.goto(s.checkoutUrl);
  const box = page.getByLabel('Company name or registration number');
  const first = page.waitForRequest((r) => r.url().includes('q=Approved+Bygg') || r.url().includes('q=Approved%20Bygg'));
  await box.fill('Approved Bygg');
  await first;
  await box.fill('Zzqx Nonesuch');
  await page.locator('#results p', { hasText: 'No company matched.' }).waitFor();
  const late = page.waitForResponse((r) => r.url().includes('Approved'));
  release();
  await late;
  await page.waitForTimeout(300);
  assert.equal(await page.locator('#results input[type=radio]').count(), 0,
    'the late answer of an earlier search replaced the results of the one in the box');
  assert.equal(await page.locator('#results p').textContent(), 'No company matched.');
  await page.close();
});
