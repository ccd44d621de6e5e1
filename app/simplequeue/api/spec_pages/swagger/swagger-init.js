// Swagger UI on the spec served beside this page. Its "Try it out" calls this very service: the
// spec names serve's default address, which the page's CSP refuses unless the page came from it.
// No validator badge: the page fetches nothing from another site.
"use strict";

(async () => {
  const root = new URL(".", document.baseURI).href.replace(/\/$/, "");
  const answer = await fetch(new URL("openapi.json", document.baseURI));
  const spec = await answer.json();
  spec.servers = [{ url: root, description: "this service" }];
  window.ui = SwaggerUIBundle({
    spec,
    dom_id: "#swagger-ui",
    layout: "BaseLayout",
    deepLinking: true,
    showExtensions: true,
    showCommonExtensions: true,
    validatorUrl: null,
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
  });
})();
