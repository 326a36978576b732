// STUB, named in tests/views/test_export_trace.py: third-party-web maps page URLs to the companies
// that serve them (for DevTools' third-party insight); it ships as CommonJS only, which a browser
// cannot import, and a planned training step has no URLs.
export default {getEntity() { return undefined; }, getRootDomain(url) { return url; }};
