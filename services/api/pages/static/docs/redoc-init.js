// Starts ReDoc on /redoc (docs/api-docs.md). A file of its own rather than an inline script,
// so that the page's Content-Security-Policy allows Tessera's own scripts and nothing else.
"use strict";

(function () {
  const root = document.getElementById("redoc");
  // ReDoc adds <style> elements; the page's CSP allows those that carry its nonce, which is
  // this script's own (browsers hide a nonce from attributes, not from the element).
  const nonce = document.currentScript.nonce;
  Redoc.init(root.dataset.openapiUrl, { nonce: nonce }, root);
})();
