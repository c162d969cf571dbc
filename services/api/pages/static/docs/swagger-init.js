// Starts Swagger UI on /docs (docs/api-docs.md). A file of its own rather than an inline
// script, so that the page's Content-Security-Policy allows Tessera's own scripts and nothing
// else; the document's URL comes from the page.
"use strict";

(function () {
  const root = document.getElementById("swagger-ui");
  window.ui = SwaggerUIBundle({
    url: root.dataset.openapiUrl,
    domNode: root,
    layout: "BaseLayout",
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
    deepLinking: true,
    displayRequestDuration: true,
    showExtensions: true,
    showCommonExtensions: true,
    // Swagger UI would otherwise send the document's address to validator.swagger.io.
    validatorUrl: null,
  });
})();
