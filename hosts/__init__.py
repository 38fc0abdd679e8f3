"""Code that runs on end hosts (``dcnlab.hosts``): agents and host-side transports."""
