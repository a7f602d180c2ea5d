"""Back ends that print a Plan for review: ARM JSON and Bicep."""
