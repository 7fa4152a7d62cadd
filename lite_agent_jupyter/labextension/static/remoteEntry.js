/*
 * lite_agent_jupyter's front-end part, for JupyterLab and Notebook 7: one plugin, written by
 * hand (no build step, no dependency). It is a prebuilt ("federated") extension: the page loads
 * this script, then asks the container below for "./extension" and registers its plugin.
 *
 * Why it exists: Notebook 7 runs keyboard shortcuts before the page's widgets see a key
 * (JupyterLab lets widgets go first), and in command mode it binds ArrowLeft / ArrowRight to
 * the heading commands, so the checkpoint slider's handle never got its arrow keys. Lumino
 * skips every shortcut for a key whose target carries `data-lm-suppress-shortcuts`; the plugin
 * puts that attribute on our slider's handle when it takes the focus, and on nothing else.
 * See docs/widgets.md, "Notebook 7".
 */
(function () {
  'use strict';
  var NAME = 'lite-agent-jupyter';
  var HANDLE = '.lite-agent-checkpoints .noUi-handle';

  var sliderKeys = {
    id: NAME + ':slider-keys',
    description: 'Gives the checkpoint slider its arrow keys in Notebook 7.',
    autoStart: true,
    activate: function () {
      document.addEventListener(
        'focusin',
        function (event) {
          var target = event.target;
          if (target instanceof Element && target.matches(HANDLE)) {
            target.setAttribute('data-lm-suppress-shortcuts', 'true');
          }
        },
        true
      );
    }
  };

  var containers = (window._JUPYTERLAB = window._JUPYTERLAB || {});
  containers[NAME] = {
    init: function () {
      return Promise.resolve();
    },
    get: function (module) {
      if (module !== './extension') {
        return Promise.reject(new Error(NAME + ' has no module ' + module));
      }
      // Both front ends read the plugins from `default` only when `__esModule` is set, as
      // webpack marks a compiled ES module.
      return Promise.resolve(function () {
        return { __esModule: true, default: [sliderKeys] };
      });
    }
  };
})();
