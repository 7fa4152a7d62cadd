"""The Jupyter face of the agent: magics, rendering and widgets."""
