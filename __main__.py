from gclc.cli.entry import console

console()
